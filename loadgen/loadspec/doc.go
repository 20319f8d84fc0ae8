// Package loadspec is what a load generator is asked to do, apart from the code that does it
// (package loadgen): its configuration file, the preloaded book's shape and key, the limits and
// defaults a playbook is checked against, and the line that says when the probe schedule started.
// The controller (runner), the action kinds and the engine drivers import this package alone, so
// they carry no wire protocol or socket code of the load generator.
package loadspec
