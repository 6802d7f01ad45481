//go:build race

package openapi_test

// raceEnabled: the race detector makes importing the published descriptions
// (13 MB and 6 MB) cost minutes and gigabytes; .ci/run imports them in a
// run of their own without it.
const raceEnabled = true
