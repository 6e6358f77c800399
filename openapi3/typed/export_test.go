package typed

// Builds is how many documents' types this process has built.
func Builds() int64 { return builds.load() }

// Conversions is how many schemas this process has parsed and converted
// (pieces).
func Conversions() int64 { return conversions.load() }
