package osb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxIDLength bounds instance and binding ids.
const maxIDLength = 1024

// queryValue is one query parameter: its first value and whether it was
// sent at all.
type queryValue struct {
	value   string
	present bool
}

// request holds the query parameters of a request that OSB defines.
type request struct {
	acceptsIncompleteV, serviceID, planID, operationV queryValue
}

// parseQuery reads the OSB query parameters (the first value of each) and
// checks that the whole query string is well-formed, as url.ParseQuery
// would: a malformed one is a 400. It allocates only for escaped values.
func parseQuery(r *http.Request) (request, error) {
	var q request
	raw := r.URL.RawQuery
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if strings.Contains(pair, ";") {
			return request{}, BadRequest("The query string is malformed: a semicolon is not a separator.")
		}
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			return request{}, BadRequest("The query string is malformed: %v.", err)
		}
		value, err := url.QueryUnescape(v)
		if err != nil {
			return request{}, BadRequest("The query string is malformed: %v.", err)
		}
		var dst *queryValue
		switch key {
		case "accepts_incomplete":
			dst = &q.acceptsIncompleteV
		case "service_id":
			dst = &q.serviceID
		case "plan_id":
			dst = &q.planID
		case "operation":
			dst = &q.operationV
		default:
			continue
		}
		if !dst.present {
			*dst = queryValue{value: value, present: true}
		}
	}
	return q, nil
}

func (q *request) get(name string) queryValue {
	switch name {
	case "service_id":
		return q.serviceID
	case "plan_id":
		return q.planID
	case "operation":
		return q.operationV
	case "accepts_incomplete":
		return q.acceptsIncompleteV
	}
	return queryValue{}
}

// acceptsIncomplete reads accepts_incomplete (absent or empty: false).
func (q request) acceptsIncomplete() (bool, error) {
	v := q.acceptsIncompleteV
	if !v.present || v.value == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v.value)
	if err != nil {
		return false, BadRequest("accepts_incomplete must be true or false, not %q.", Truncate(v.value, 100))
	}
	return b, nil
}

// hint checks an optional query value that, when present, must not be
// empty (service_id, plan_id). The broker does not use the value: the
// instance or binding already names its service and plan.
func (q request) hint(name string) error {
	if v := q.get(name); v.present && v.value == "" {
		return BadRequest("%s must not be empty when present.", name)
	}
	return nil
}

// required returns a mandatory query value.
func (q request) required(name string) (string, error) {
	v := q.get(name)
	if v.value == "" {
		return "", BadRequest("The query parameter %s is required.", name)
	}
	return v.value, nil
}

// operation returns the operation query parameter, "" when absent; one
// sent empty is a 400. What it names is the backend's to read.
func (q request) operation() (string, error) {
	v := q.operationV
	if v.present && v.value == "" {
		return "", BadRequest("operation must not be empty when present.")
	}
	return v.value, nil
}

// pathID reads and checks an id from the path. OSB puts no limit on the
// characters of an id (it recommends RFC 3986 unreserved ones), but an id
// is stored in the spec of an object, in a namespace annotation and in
// logs: NUL and other control characters, which would truncate or forge log
// lines and which the API server's JSON would carry as escapes, and bytes
// that are not UTF-8, which JSON cannot hold unchanged (two ids would then
// be stored alike), are refused with 400.
func pathID(r *http.Request, name string) (string, error) {
	id := r.PathValue(name)
	switch {
	case id == "":
		return "", BadRequest("%s must not be empty.", name)
	case len(id) > maxIDLength:
		return "", BadRequest("%s is longer than %d bytes.", name, maxIDLength)
	}
	if err := checkIDChars(id); err != nil {
		return "", BadRequest("%s %s.", name, err)
	}
	return id, nil
}

// invalidAt reports whether the RuneError decoded at byte i of s is a byte
// that is not UTF-8 rather than a literal U+FFFD.
func invalidAt(s string, i int) bool {
	_, size := utf8.DecodeRuneInString(s[i:])
	return size == 1
}

// checkIDChars reports why id cannot be an instance or binding id: it
// holds a control character (C0, DEL or C1, NUL included), a Unicode format
// character (invisible, e.g. a bidirectional override that makes an id look
// like another in logs), or bytes that are not UTF-8. It is cheap for the
// common case, an ASCII GUID, since it runs on every request.
func checkIDChars(id string) error {
	for i, c := range id {
		switch {
		case c < 0x80 && c >= 0x20 && c != 0x7f:
			continue
		case c == utf8.RuneError && invalidAt(id, i):
			return fmt.Errorf("is not valid UTF-8 (at byte %d)", i)
		case unicode.IsControl(c):
			return fmt.Errorf("must not contain control characters (U+%04X at byte %d); use the unreserved characters OSB recommends", c, i)
		case unicode.Is(unicode.Cf, c):
			return fmt.Errorf("must not contain invisible format characters (U+%04X at byte %d); use the unreserved characters OSB recommends", c, i)
		}
	}
	return nil
}

// decodeBody reads a JSON object body into v.
func decodeBody(r *http.Request, v any) error {
	if r.Body == nil {
		return BadRequest("The request body is missing; want a JSON object.")
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge(mbe.Limit)
		}
		return BadRequest("Cannot read the request body: %v.", err)
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return BadRequest("The request body is empty; want a JSON object.")
	}
	if data[0] != '{' {
		return BadRequest("The request body must be a JSON object.")
	}
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return BadRequest("The request body is invalid: %s must not be a JSON %s.", fieldName(te), te.Value)
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return BadRequest("The request body is not valid JSON (at byte %d).", se.Offset)
		}
		return BadRequest("The request body is invalid.")
	}
	return nil
}

func fieldName(te *json.UnmarshalTypeError) string {
	if te.Field != "" {
		return te.Field
	}
	return "a field"
}

// Truncate cuts s to n bytes for a description or a log line, marking
// the cut with an ellipsis.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// CheckPlatform enforces that the originating identity's platform equals
// context.platform when both are sent (OSB "Originating Identity").
func CheckPlatform(id *OriginatingIdentity, ctx json.RawMessage) error {
	if id == nil {
		return nil
	}
	if p := contextPlatform(ctx); p != "" && p != id.platform {
		return BadRequest("The platform of %s (%q) differs from context.platform (%q).", HeaderOriginatingIdentity, id.platform, p)
	}
	return nil
}

// pathIDs are the ids in a request's path; bindingID is empty on instance
// endpoints.
type pathIDs struct {
	instanceID, bindingID string
}

// parseOpts says what parseCall reads besides the instance id and the
// query string.
type parseOpts uint8

const (
	// parseBinding reads binding_id.
	parseBinding parseOpts = 1 << iota
	// parseDelete requires service_id and plan_id (DELETE).
	parseDelete
	// parseHints checks that service_id and plan_id, when present, are
	// not empty (GET).
	parseHints
	// parseAsync reads accepts_incomplete into the call.
	parseAsync
)

// parseCall reads the ids and the query parameters of a request, in the
// order that decides which of several faults is reported: ids, query
// syntax, required parameters, hints, accepts_incomplete.
func parseCall(x *exchange, r *http.Request, opts parseOpts) (pathIDs, request, error) {
	var ids pathIDs
	var err error
	if ids.instanceID, err = pathID(r, "instance_id"); err != nil {
		return ids, request{}, err
	}
	if opts&parseBinding != 0 {
		if ids.bindingID, err = pathID(r, "binding_id"); err != nil {
			return ids, request{}, err
		}
	}
	q, err := parseQuery(r)
	if err != nil {
		return ids, q, err
	}
	if err := q.check(opts); err != nil {
		return ids, q, err
	}
	if opts&parseAsync != 0 {
		if x.call.AcceptsIncomplete, err = q.acceptsIncomplete(); err != nil {
			return ids, q, err
		}
	}
	return ids, q, nil
}

// check runs the checks of the required parameters and hints that opts
// ask for.
func (q request) check(opts parseOpts) error {
	if opts&parseDelete != 0 {
		for _, name := range []string{"service_id", "plan_id"} {
			if _, err := q.required(name); err != nil {
				return err
			}
		}
	}
	if opts&parseHints != 0 {
		for _, name := range []string{"service_id", "plan_id"} {
			if err := q.hint(name); err != nil {
				return err
			}
		}
	}
	return nil
}
