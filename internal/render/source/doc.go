// Package source fetches the text of plan templates and Helm chart archives
// named by a template's url, for the renderer in the parent package.
//
// Supported schemes:
//
//   - http and https: fetched with a timeout and a size limit, and cached by
//     URL for a time to live (default one minute). After the time to live
//     the cached copy is revalidated with If-None-Match / If-Modified-Since
//     when the server sent an ETag or Last-Modified, so an unchanged template
//     costs a 304 and no download. When revalidation fails with a transient
//     error (network, 5xx), the stale copy is served.
//   - file: a local file, for air-gapped installs that bake templates into the
//     operator image or mount them from a volume. file URLs are refused unless
//     the Fetcher was given the directories it may read (WithFileRoots): plan
//     authors must not be able to read arbitrary files of the operator's
//     container, such as its service-account token. Symbolic links are
//     resolved before the check. Files are read on every fetch, not cached.
//   - configmap: configmap://<namespace>/<name>/<key> reads one key of a
//     ConfigMap (binaryData first, then data) through a ConfigMapGetter, so
//     this package needs no live client; the caller passes one, usually its
//     cached client (ReaderConfigMapGetter). Not cached here.
//
// Every fetch is bounded by the size limit its caller passes. Errors are of
// type *Error: they name the URL with any user information and query string
// removed (both may carry credentials) and tell whether retrying may help.
package source
