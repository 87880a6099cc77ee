// Package api is the root of Marketplane's API layer: the Go types of every
// API group live in the packages below it (api/<group>/<version>), with the
// types several groups share in api/common and the generated CRDs in
// api/crds. This package holds no code; its test keeps the layer's one rule,
// that API packages import nothing of Marketplane's but other API packages,
// so that the types can be used without pulling in the runtime.
package api
