// Package scaffold writes a new service provider project, the `marketplane
// scaffold provider` command: API types and CRDs, a controller with sample
// logic on pkg/spruntime, the init/run binary, a Makefile, a README and
// tests against real API servers. Generated code is rendered to exactly
// what controller-gen writes, so the project builds without a generator.
// NewProject renders every file in memory; Project.Write writes them and
// refuses to overwrite anything. docs/providers.md describes the project.
package scaffold
