// Package app is the marketplane-broker process: its flags, and Run, which
// wires the catalog watcher (platform cluster), the Kubernetes store and
// tombstone reaper (onboarding cluster), the OSB handler, optional TLS, the
// metrics and probe server, credential rotation from a Secret, and a
// graceful shutdown that lets in-flight requests finish.
package app
