package fleet

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"

	"k8s.io/client-go/tools/clientcmd"
)

// AddKubeconfig adds every context of a kubeconfig file whose name
// matches glob (path.Match; "*" for all), each under its context name,
// with client-go's own handling of the file (auth plugins, certificates
// relative to it). It returns the IDs added, sorted; contexts that cannot
// be used are skipped and reported together in the error.
func (f *Fleet) AddKubeconfig(kubeconfig, glob string) ([]string, error) {
	if _, err := path.Match(glob, ""); err != nil {
		return nil, fmt.Errorf("fleet: contexts %q: %w", glob, err)
	}
	raw, err := clientcmd.LoadFromFile(kubeconfig)
	if pathErr := (*fs.PathError)(nil); errors.As(err, &pathErr) {
		return nil, fmt.Errorf("fleet: %w", err) // it names the file
	} else if err != nil {
		return nil, fmt.Errorf("fleet: kubeconfig %s: %w", kubeconfig, err) // client-go's decoding errors do not
	}
	var names []string
	for name := range raw.Contexts {
		if ok, _ := path.Match(glob, name); ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var added []string
	var errs []error
	for _, name := range names {
		cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
		if err == nil {
			_, err = f.Add(name, cfg)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("context %s: %w", name, err))
			continue
		}
		added = append(added, name)
	}
	return added, errors.Join(errs...)
}
