// Package source fetches the text of plan templates and Helm chart archives
// named by a template's url, for package render: http and https (cached and
// revalidated), file (only below the directories the Fetcher was given) and
// configmap://<namespace>/<name>/<key> (through a ConfigMapGetter). Every
// fetch is bounded in size, and errors never show a URL's credentials.
// docs/interoperator.md lists what each scheme reads.
package source
