package archive

// Test helpers shared with the external S3 tests (package archive_test).
var (
	MakeRun      = makeRun
	CompareTrees = compareTrees
)
