package clusterversion

// Only clusterversion.go is the table: the package's other files are held
// to the rule too.
func latest(v uint32) bool { return v == Supported } // want `cluster version compared with == outside the feature table \(clusterversion.Supported is a version\)`
