// Package app is the provider operator's command line: the contract flags,
// the init subcommand that installs the operator's CRDs, and the run
// subcommand that wires every operator controller into a manager.
package app
