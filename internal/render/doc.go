// Package render renders the templates of SFPlans, as Service Fabrik's
// inter-operator does, so that plans written for Service Fabrik work
// unchanged. It is a pure library: it reads no cluster (ConfigMap sources go
// through an interface of package source) and applies nothing.
//
// A Renderer renders one TemplateSpec with an Input:
//
//   - Render for provision, bind and unbind templates: the objects to
//     apply. A gotemplate may render several objects as YAML documents
//     separated by "---". A helm template renders the chart at its url,
//     client side, with the values its content renders; the CRDs of its
//     crds/ directories come apart (Objects.CRDs), untemplated, for the
//     caller to install as Helm does. RenderObjects gives both in one list.
//   - RenderMap for sources and status templates, which render one YAML
//     mapping; ParseSources and ParseStatus read them.
//   - RenderString for clusterSelector templates, which render a label
//     selector.
//
// Template text comes from content, else contentEncoded (base64), else url
// (http, https, file or configmap; see package source). gotemplates are Go
// text/template with all of Sprig v3 and Service Fabrik's functions b64enc,
// b64dec, unmarshalJSON and marshalJSON (which fail the render on bad
// input), and toToml, toYaml, fromYaml, toJson and fromJson (which do not:
// the from functions return a map with the error text under "Error").
// Sprig's getHostByName, env and expandenv are not defined: a render reads
// neither the network nor the inter-operator's environment.
//
// Variables are .service, .plan, .instance and, for bindings, .binding, as
// maps (Values); every template also sees the sources by their names
// (WithSources), as Service Fabrik's do.
//
// Parsed templates and loaded charts are cached by the SHA-256 of their
// content, in bounded LRU caches, so that rendering the same plan again
// costs no parsing. Each render runs under Limits: a time limit, a limit on
// its output and on the values its functions produce, and size limits on
// template text and chart archives. A render that exceeds them fails with
// ErrTimeLimit or ErrSizeLimit; a panic becomes an error.
//
// A gotemplate execution cannot be interrupted from outside, so every step
// that can repeat checks the limits: the renderer inserts an empty text,
// whose write checks them, into the parse tree at the start of every range
// body and of every template (guardLoops); template functions check on
// every call, output on every write. An execution that ran out of time stops within one step
// (Stats.Abandoned counts them). Functions whose result would be huge are
// refused before they run (until, repeat, printf padding, ...), and every
// result is counted with all it contains, so that no value can contain
// itself or nest deeper than 1000 levels. Loops over constants that would
// repeat their body more than MaxConstantIterations times do not parse
// (Check, which the catalog uses too).
//
// Helm's engine parses a chart's templates itself and takes no functions of
// ours, so it cannot be instrumented: charts render in worker processes
// (package internal/helmworker, started from the running binary) that are
// killed when a render runs out of time or memory (Limits.MaxHelmMemoryBytes)
// or its caller's context ends (Stats.Killed counts them).
//
// Errors are of type *Error: they name the action, the type, where the text
// came from and the step that failed, and never quote variables.
// IsTransient tells the errors that may pass on their own (network, server,
// cancelled context) from those that need a new plan.
package render
