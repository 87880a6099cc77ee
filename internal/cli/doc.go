// Package cli holds the cobra commands of the marketplane binary; main only
// executes the root command.
package cli
