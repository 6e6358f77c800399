// Package optset keeps a rule every constructor of kubeatlas follows: an
// option may be given once. Two of one option (often a wrapper's default
// and a user's choice) would otherwise be silently last-wins; the second
// is a constructor error that names it. (discovery keeps its own copy of
// these few lines, so that a program that imports only discovery links no
// package more.)
package optset

import "fmt"

// Given records the options a constructor was given, by name.
type Given map[string]bool

// Named is the option name, set applied once: given again, it is an error
// prefixed with pkg. given returns the options' record (a nil one is
// made).
func Named[O any](pkg, name string, given func(*O) *Given, set func(*O) error) func(*O) error {
	return func(o *O) error {
		g := given(o)
		if (*g)[name] {
			return fmt.Errorf("%s: %s given twice", pkg, name)
		}
		if *g == nil {
			*g = Given{}
		}
		(*g)[name] = true
		return set(o)
	}
}
