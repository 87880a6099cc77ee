//go:build tools

// Package tools pins the etcd server built by `make tools`.
package tools

import _ "go.etcd.io/etcd/server/v3"
