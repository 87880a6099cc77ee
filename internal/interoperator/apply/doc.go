// Package apply puts the objects a plan's templates render onto a target
// cluster and takes them off again: server-side apply with one field owner
// and forced ownership, the instance's labels on every object, namespaces
// defaulted for namespaced kinds, and deletion that reports what is still
// there so that the caller can wait for it. A Helm chart's crds/ CRDs are
// installed as Helm installs them (MissingCRDs, InstallCRDs): created when
// missing, never updated; a CRD, applied or installed, is served before
// the objects after it are applied.
//
// Errors say whose fault they are: an *InvalidObjectError (the render
// produced something that cannot be applied, found before any request) and
// a *RejectedError (the API server refused the object for what it is) need
// a new plan or new parameters; an *UnknownKindError or *UnservedCRDError
// (the cluster does not serve the kind) needs the kind installed on the
// cluster or a new plan; every other error may pass on its own.
package apply
