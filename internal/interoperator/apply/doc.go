// Package apply puts the objects a plan's templates render onto a target
// cluster and takes them off again: server-side apply with one field owner
// and forced ownership, the instance's labels on every object, namespaces
// defaulted for namespaced kinds, and deletion that reports what is still
// there so that the caller can wait for it.
//
// Errors say whose fault they are: an *InvalidObjectError (the render
// produced something that cannot be applied, found before any request) and
// a *RejectedError (the API server refused the object for what it is) need
// a new plan or new parameters; every other error may pass on its own.
package apply
