// Package names shortens generated Kubernetes names that would exceed a
// length limit: a prefix of the name with a hash of the whole appended, so
// that two long names that share a prefix stay distinct and the same input
// always gives the same name. The operator names provider objects this way
// and the marketplace names Offerings this way; the output must never
// change, since objects already created carry these names.
package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// HashLen is the number of hex digits of the hash that makes a shortened
// name unique.
const HashLen = 8

// Shorten returns s if it is at most limit bytes long, else a prefix of s
// with a hash of s appended that together are limit bytes long at most.
func Shorten(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	return WithHash(s, s, limit)
}

// WithHash cuts prefix so that "-<hash of full>" fits behind it within
// limit bytes, and appends it. Trailing separators are trimmed from the cut
// so that the result stays a valid name.
func WithHash(prefix, full string, limit int) string {
	sum := sha256.Sum256([]byte(full))
	suffix := hex.EncodeToString(sum[:])[:HashLen]
	if keep := limit - HashLen - 1; len(prefix) > keep {
		prefix = prefix[:keep]
	}
	prefix = strings.TrimRight(prefix, "-.:")
	return prefix + "-" + suffix
}
