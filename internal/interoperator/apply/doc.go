// Package apply puts the objects a plan's templates render onto a target
// cluster and takes them off again: server-side apply with one field owner,
// the instance's labels on every object, namespaces defaulted, a Helm
// chart's CRDs installed as Helm does, and deletion that reports what is
// still there. Its errors say whose fault they are: IsPermanent tells those
// that need a new plan or parameters from those that may pass on their own.
package apply
