package osb

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// OSB request headers.
const (
	HeaderAPIVersion          = "X-Broker-API-Version"
	HeaderOriginatingIdentity = "X-Broker-API-Originating-Identity"
	HeaderRequestIdentity     = "X-Broker-API-Request-Identity"
)

// APIVersion is an OSB API version, MAJOR.MINOR.
type APIVersion struct {
	Major, Minor int
}

// String returns "MAJOR.MINOR".
func (v APIVersion) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Less reports whether v is older than w.
func (v APIVersion) Less(w APIVersion) bool {
	return v.Major < w.Major || (v.Major == w.Major && v.Minor < w.Minor)
}

// OSB versions whose additions change what the broker answers (the
// release notes of the OSB specification; docs/broker.md "API versions").
var (
	// Version2_11 is the oldest version the broker accepts by default:
	// the oldest one platforms in use send (service-catalog's client
	// knows 2.11 to 2.14).
	Version2_11 = APIVersion{Major: 2, Minor: 11}
	// Version2_14 added asynchronous bindings (accepts_incomplete on
	// bind and unbind, and the binding's last_operation) and the GET
	// endpoints of instances and bindings.
	Version2_14 = APIVersion{Major: 2, Minor: 14}
	// Version2_15 added endpoints to bind responses.
	Version2_15 = APIVersion{Major: 2, Minor: 15}
	// Version2_16 added a binding's metadata (expires_at).
	Version2_16 = APIVersion{Major: 2, Minor: 16}
)

// implementedVersion is the OSB version the broker implements.
var implementedVersion = APIVersion{Major: 2, Minor: 17}

// DefaultMinAPIVersion is the oldest OSB version the broker accepts by
// default. Service Manager and eden send 2.13; every later 2.x is
// accepted too, since minor versions only add (the specification's change
// policy).
var DefaultMinAPIVersion = Version2_11

// ParseAPIVersion parses "MAJOR.MINOR" (digits only).
func ParseAPIVersion(s string) (APIVersion, error) {
	major, minor, ok := strings.Cut(s, ".")
	if !ok || !digits(major) || !digits(minor) || len(major) > 4 || len(minor) > 4 {
		return APIVersion{}, fmt.Errorf("%q is not MAJOR.MINOR", s)
	}
	a, _ := strconv.Atoi(major)
	b, _ := strconv.Atoi(minor)
	return APIVersion{Major: a, Minor: b}, nil
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// maxIdentityBytes bounds the decoded originating identity kept on objects.
const maxIdentityBytes = 4096

// OriginatingIdentity is a parsed X-Broker-API-Originating-Identity.
type OriginatingIdentity struct {
	// platform is the platform name, e.g. "cloudfoundry".
	platform string
	// value is the identity as compact JSON.
	value string
}

// Annotation returns the audit form "<platform> <identity JSON>".
func (o *OriginatingIdentity) Annotation() string { return o.platform + " " + o.value }

// parseOriginatingIdentity parses "<platform> <base64 of a JSON object>".
func parseOriginatingIdentity(h string) (*OriginatingIdentity, error) {
	platform, encoded, ok := strings.Cut(strings.TrimSpace(h), " ")
	encoded = strings.TrimSpace(encoded)
	if !ok || platform == "" || encoded == "" {
		return nil, errors.New("want \"<platform> <base64-encoded JSON object>\"")
	}
	if len(encoded) > maxIdentityBytes*2 {
		return nil, fmt.Errorf("the identity is longer than %d bytes", maxIdentityBytes)
	}
	raw, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		if raw, err = base64.RawStdEncoding.DecodeString(encoded); err != nil {
			return nil, errors.New("the identity is not base64")
		}
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
		return nil, errors.New("the identity is not a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, errors.New("the identity is not a JSON object")
	}
	if buf.Len() > maxIdentityBytes {
		return nil, fmt.Errorf("the identity is longer than %d bytes", maxIdentityBytes)
	}
	return &OriginatingIdentity{platform: platform, value: buf.String()}, nil
}
