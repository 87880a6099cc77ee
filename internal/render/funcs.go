package render

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"text/template"

	"github.com/BurntSushi/toml"
	"github.com/Masterminds/sprig/v3"
	"sigs.k8s.io/yaml"
)

// baseFuncs returns the functions of a gotemplate: all of Sprig v3, the
// template builtins that can grow text (print, printf, println, html, js,
// urlquery), and Service Fabrik's extras, which replace Sprig's functions of
// the same name.
//
// Sprig's functions that reach outside the template are not defined, so
// that a template using them does not parse (removedFuncs).
func baseFuncs() template.FuncMap {
	f := sprig.TxtFuncMap()
	for _, name := range removedFuncs {
		delete(f, name)
	}

	f["print"] = fmt.Sprint
	f["printf"] = fmt.Sprintf
	f["println"] = fmt.Sprintln
	f["html"] = template.HTMLEscaper
	f["js"] = template.JSEscaper
	f["urlquery"] = template.URLQueryEscaper

	f["b64enc"] = b64enc
	f["b64dec"] = b64dec
	f["unmarshalJSON"] = unmarshalJSON
	f["marshalJSON"] = marshalJSON
	f["toToml"] = toToml
	f["toYaml"] = toYaml
	f["fromYaml"] = fromYaml
	f["toJson"] = toJson
	f["fromJson"] = fromJson
	return f
}

// Funcs returns the functions a gotemplate may call, for parsing templates
// outside a Renderer (catalog validation): a template that parses with them
// parses in a render, and one that calls a removed function does not.
func Funcs() template.FuncMap { return baseFuncs() }

// removedFuncs are Sprig's functions that a gotemplate cannot call: they
// would make what a plan renders depend on the process and network that
// render it rather than on the plan and the request. getHostByName resolves
// a host name at render time (a DNS request the tenant's parameters can
// aim, and an answer that leaks into the rendered objects); env and
// expandenv read the inter-operator's environment, which may hold
// credentials.
var removedFuncs = []string{"getHostByName", "env", "expandenv"}

// b64enc encodes s in standard base64.
func b64enc(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// b64dec decodes standard base64; unlike Sprig's, it fails the render on
// bad input instead of returning the error text.
func b64dec(s string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "", fmt.Errorf("b64dec: %w", err)
	}
	return string(b), nil
}

// unmarshalJSON decodes a JSON object and fails the render on bad input.
func unmarshalJSON(s string) (map[string]any, error) {
	m := map[string]any{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		// The input is not quoted: it may be a credential.
		return nil, fmt.Errorf("unmarshalJSON: input is not a JSON object: %w", err)
	}
	return m, nil
}

// marshalJSON encodes v as JSON and fails the render when it cannot.
func marshalJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("marshalJSON: %w", err)
	}
	return string(b), nil
}

// toToml encodes v as TOML; on failure it returns the error text, as
// Service Fabrik's does.
func toToml(v any) string {
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(v); err != nil {
		return err.Error()
	}
	return b.String()
}

// toYaml encodes v as YAML without the final newline; on failure it returns
// the empty string.
func toYaml(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

// fromYaml decodes a YAML mapping; on failure the map holds the error text
// under the key "Error".
func fromYaml(s string) map[string]any {
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

// toJson encodes v as JSON; on failure it returns the empty string.
func toJson(v any) string { //nolint:revive // named after the template function
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// fromJson decodes a JSON object; on failure the map holds the error text
// under the key "Error".
func fromJson(s string) map[string]any { //nolint:revive // named after the template function
	m := map[string]any{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

// estimators predict, from the arguments, how large the result of a
// function that multiplies its input will be, so that the guard can refuse
// the call before the memory is allocated. Sizes are in bytes; a list counts
// listElementCost bytes per element.
var estimators = map[string]func(args []reflect.Value) int64{
	"until": func(a []reflect.Value) int64 { return abs(a[0].Int()) * listElementCost },
	"untilStep": func(a []reflect.Value) int64 {
		return steps(a[0].Int(), a[1].Int(), a[2].Int()) * listElementCost
	},
	"seq": func(a []reflect.Value) int64 {
		p := a[0] // variadic ...int
		lo, step := int64(1), int64(1)
		var hi int64
		switch p.Len() {
		case 0:
			return 0
		case 1:
			hi = p.Index(0).Int()
		case 2:
			lo, hi = p.Index(0).Int(), p.Index(1).Int()
		default:
			lo, step, hi = p.Index(0).Int(), p.Index(1).Int(), p.Index(2).Int()
		}
		// Each number takes at most 21 bytes with its separator.
		return (steps(lo, hi, step) + 1) * 21
	},
	"repeat": func(a []reflect.Value) int64 { return mul(abs(a[0].Int()), int64(a[1].Len())) },
	"indent": func(a []reflect.Value) int64 {
		return indentSize(a[0].Int(), a[1].String())
	},
	"nindent": func(a []reflect.Value) int64 {
		return indentSize(a[0].Int(), a[1].String()) + 1
	},
	"wrapWith": func(a []reflect.Value) int64 {
		width, sep, s := max(a[0].Int(), 1), int64(a[1].Len()), int64(a[2].Len())
		return s + mul(s/width+1, sep)
	},
	"replace": func(a []reflect.Value) int64 {
		old, repl, src := a[0].String(), int64(a[1].Len()), a[2].String()
		n := int64(len(src)) + 1
		if old != "" {
			n = int64(strings.Count(src, old))
		}
		return int64(len(src)) + mul(n, repl)
	},
	"randAlphaNum": countArg,
	"randAlpha":    countArg,
	"randAscii":    countArg,
	"randNumeric":  countArg,
	"randBytes":    func(a []reflect.Value) int64 { return mul(abs(a[0].Int()), 2) },
	// printf pads to the widths and precisions of its format, however
	// short its arguments: "%1000000d%1000000d…" in a 1 MB template would
	// ask for about 90 GB.
	"printf":                     printfSize,
	"regexReplaceAll":            regexReplaceSize(true),
	"mustRegexReplaceAll":        regexReplaceSize(true),
	"regexReplaceAllLiteral":     regexReplaceSize(false),
	"mustRegexReplaceAllLiteral": regexReplaceSize(false),
}

// comparisons predict how many element comparisons a function whose work
// grows with the square of its input makes; the guard refuses calls above
// maxComparisons, which would run on long after the render's time limit.
var comparisons = map[string]func(args []reflect.Value) int64{
	"uniq":     uniqComparisons,
	"mustUniq": uniqComparisons,
}

// maxComparisons bounds the element comparisons of one call: about a
// second of work.
const maxComparisons = 10_000_000

func uniqComparisons(a []reflect.Value) int64 {
	n := int64(0)
	if v := indirectValue(a[0]); v.Kind() == reflect.Slice || v.Kind() == reflect.Array {
		n = int64(v.Len())
	}
	return mul(n, n) / 2
}

// selectors return one of their arguments or a part of one, unchanged: the
// guard charges what they return as it stands (a map or list by its own
// entries), since it was counted in full when it was made. Every other
// function's result is charged with all it contains.
var selectors = map[string]bool{
	"default": true, "coalesce": true, "ternary": true, "dig": true, "get": true,
	"first": true, "mustFirst": true, "last": true, "mustLast": true,
}

// listElementCost is what one element of a list counts against the limits.
const listElementCost = 8

func countArg(a []reflect.Value) int64 { return abs(a[0].Int()) }

func abs(n int64) int64 {
	if n < 0 {
		if n == -n { // math.MinInt64
			return 1 << 62
		}
		return -n
	}
	return n
}

// mul multiplies non-negative numbers, saturating instead of overflowing.
func mul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > (1<<62)/b {
		return 1 << 62
	}
	return a * b
}

// steps is the number of values from lo towards hi in steps of step.
func steps(lo, hi, step int64) int64 {
	step = abs(step)
	if step == 0 {
		step = 1
	}
	d := hi - lo
	if (hi > lo) != (d > 0) { // overflow
		return 1 << 62
	}
	return abs(d)/step + 1
}

func indentSize(spaces int64, s string) int64 {
	return int64(len(s)) + mul(abs(spaces), int64(strings.Count(s, "\n")+1))
}

// printfSize estimates the output of printf: the format, its string
// arguments and the widths and precisions its verbs pad to. fmt caps each
// at a million; a width or precision taken from an argument (*) counts as
// the largest integer argument.
func printfSize(a []reflect.Value) int64 {
	const fmtMax = 1_000_000
	format := a[0].String()
	args := a[1] // variadic ...any
	size := int64(len(format))
	var star int64
	for i := 0; i < args.Len(); i++ {
		switch v := indirectValue(args.Index(i)); {
		case v.Kind() == reflect.String:
			size += int64(v.Len())
		case v.CanInt():
			star = max(star, min(abs(v.Int()), fmtMax))
		}
	}
	i := 0
	skip := func(chars string) {
		for i < len(format) && strings.IndexByte(chars, format[i]) >= 0 {
			i++
		}
	}
	argIndex := func() {
		if i < len(format) && format[i] == '[' {
			if j := strings.IndexByte(format[i:], ']'); j >= 0 {
				i += j + 1
			}
		}
	}
	number := func() int64 {
		argIndex()
		if i < len(format) && format[i] == '*' {
			i++
			return star
		}
		n := int64(0)
		for ; i < len(format) && format[i] >= '0' && format[i] <= '9'; i++ {
			n = min(n*10+int64(format[i]-'0'), fmtMax)
		}
		return n
	}
	for i < len(format) {
		if format[i] != '%' {
			i++
			continue
		}
		i++
		skip("+-# 0")
		size += number()
		if i < len(format) && format[i] == '.' {
			i++
			size += number()
		}
	}
	return size
}

// regexReplaceSize estimates the output of a regular expression
// replacement: each of up to len(src)+1 matches becomes repl, and with
// expand, each $ reference in repl adds at most all of src in total (the
// matches do not overlap).
func regexReplaceSize(expand bool) func(a []reflect.Value) int64 {
	return func(a []reflect.Value) int64 {
		src, repl := a[1].String(), a[2].String()
		n := int64(len(src))
		size := n + mul(n+1, int64(len(repl)))
		if expand {
			size += mul(int64(strings.Count(repl, "$")), n)
		}
		return size
	}
}

// maxValueDepth bounds how deeply the values that template functions
// return may nest: deeper ones are refused, so that printing or encoding
// them cannot exhaust the stack.
const maxValueDepth = 1000

// errTooDeep is the cause of a refused value that nests too deeply.
var errTooDeep = fmt.Errorf("the value nests deeper than %d levels, or contains itself", maxValueDepth)

// resultSize is what a function's result counts against the limits:
// strings and byte slices by their length, lists by listElementCost per
// element and maps by twice that per entry, plus, when deep, everything
// the elements contain, counted wherever it is contained. So a value built
// from shared parts costs what it would print as, and one that contains
// itself (set $d "self" $d) has no end. Counting stops above limit: it
// takes at most about limit/listElementCost steps.
func resultSize(v reflect.Value, deep bool, limit int64) (int64, error) {
	var size int64
	var walk func(v reflect.Value, depth int) error
	walk = func(v reflect.Value, depth int) error {
		if size > limit {
			return nil
		}
		if depth > maxValueDepth {
			return errTooDeep
		}
		switch v.Kind() {
		case reflect.String:
			size += int64(v.Len())
		case reflect.Slice, reflect.Array:
			if v.Type().Elem().Kind() == reflect.Uint8 {
				size += int64(v.Len())
				return nil
			}
			size += int64(v.Len()) * listElementCost
			for i := 0; deep && i < v.Len() && size <= limit; i++ {
				if err := walk(v.Index(i), depth+1); err != nil {
					return err
				}
			}
		case reflect.Map:
			size += int64(v.Len()) * 2 * listElementCost
			for it := v.MapRange(); deep && size <= limit && it.Next(); {
				if err := walk(it.Value(), depth+1); err != nil {
					return err
				}
			}
		case reflect.Interface, reflect.Pointer:
			if !v.IsNil() {
				return walk(v.Elem(), depth)
			}
		}
		return nil
	}
	err := walk(v, 0)
	return size, err
}

// indirectValue returns what an interface or pointer holds.
func indirectValue(v reflect.Value) reflect.Value {
	for (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) && !v.IsNil() {
		v = v.Elem()
	}
	return v
}

// guardedFuncs wraps every function of base so that each call first checks
// g (time limit, abandoned render, remaining budget), refuses calls whose
// estimated result is too large, and charges the size of its result.
func guardedFuncs(base template.FuncMap, g *guard) template.FuncMap {
	out := make(template.FuncMap, len(base))
	for name, fn := range base {
		out[name] = guardFunc(name, fn, g)
	}
	return out
}

func guardFunc(name string, fn any, g *guard) any {
	v := reflect.ValueOf(fn)
	t := v.Type()
	estimate := estimators[name]
	compares := comparisons[name]
	deep := !selectors[name]
	variadic := t.IsVariadic()
	return reflect.MakeFunc(t, func(args []reflect.Value) []reflect.Value {
		// A panic with an error is how a function without an error result
		// fails: text/template turns it into an execution error.
		if err := g.check(); err != nil {
			panic(err)
		}
		if estimate != nil {
			if err := g.admit(name, estimate(args)); err != nil {
				panic(err)
			}
		}
		if compares != nil {
			if n := compares(args); n > maxComparisons {
				panic(fmt.Errorf("%s would compare about %d pairs of elements, more than the %d a call may: %w", name, n, maxComparisons, ErrTimeLimit))
			}
		}
		var res []reflect.Value
		if variadic {
			res = v.CallSlice(args)
		} else {
			res = v.Call(args)
		}
		size, err := resultSize(res[0], deep, min(g.maxValue, g.budget))
		if err != nil {
			panic(fmt.Errorf("%s: %w: %w", name, err, ErrSizeLimit))
		}
		if err := g.charge(name, size); err != nil {
			panic(err)
		}
		return res
	}).Interface()
}
