package typed

// Builds is how many documents' types this process has built.
func Builds() int64 { return builds.load() }
