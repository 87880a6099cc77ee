// Package render renders the templates of SFPlans as Service Fabrik's
// inter-operator does, so that its plans work unchanged: a Renderer renders
// one TemplateSpec, a gotemplate (text/template with Sprig v3 and Service
// Fabrik's functions) or a Helm chart (client side, in killable worker
// processes), into objects, a map or a string. It is a pure library that
// reads no cluster and applies nothing, and every render runs under Limits
// that stop it for good. docs/interoperator.md describes templates, their
// functions and the limits.
package render
