// Package kube is the Kubernetes deploy.Deployer: it runs a provider's init
// command as a Job and its run command as a Deployment on the platform
// cluster, with a ClusterIP Service in front of the metrics endpoint.
//
// Init runs once per generation of the provider object: the Job carries
// the generation in an annotation, and a Job of another generation is
// replaced. The Job has BackoffLimit 0 and restart policy Never, so that a
// failure shows at once; the deployer replaces a failed Job itself after
// deploy.InitBackoff (measured from the Job's failure), counting attempts
// in another annotation. Everything it creates carries a controller
// reference to the provider object, so that the provider reconciler is
// woken by changes to its Jobs and Deployments.
//
// Run is called only once init of the current generation succeeded, so
// while a new generation initialises the Deployment of the previous one
// keeps running unchanged. Objects are written with server-side apply
// (field manager FieldOwner), so an unchanged spec causes no write and a
// field the operator stops setting (a metrics port, say) is removed.
package kube
