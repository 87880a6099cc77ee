package install

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"

	rbacv1 "k8s.io/api/rbac/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// auditPolicy records every request at level Metadata (who did what to
// which object, and the answer) once it completed; watches also when they
// start, so that one still open at the end is counted.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// auditArgs writes the audit policy into dir and returns the API server
// flags that log to dir/audit.log, and that path.
func auditArgs(t *testing.T, dir string) (args []string, logPath string) {
	t.Helper()
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		t.Fatalf("write audit policy: %v", err)
	}
	logPath = filepath.Join(dir, "audit.log")
	return []string{"--audit-policy-file=" + policy, "--audit-log-path=" + logPath}, logPath
}

// auditRequest is one request of the audit log, however many stages
// recorded it.
type auditRequest struct {
	Verb string
	// Group, Resource (with "/subresource"), Namespace and Name are from
	// the request's object reference; Resource is empty for a
	// non-resource request (URL).
	Group, Resource, Namespace, Name string
	URL                              string
	Code                             int32
	// Message is the failure's message, if any.
	Message string
	// Decision and Reason are the authorizer's
	// (authorization.k8s.io/decision, /reason annotations).
	Decision, Reason string
}

// String names the request the way a rule names what it grants.
func (r auditRequest) String() string {
	if r.Resource == "" {
		return r.Verb + " " + r.URL
	}
	where := r.Namespace + "/" + r.Name
	return fmt.Sprintf("%s %s %s", r.Verb, groupResource(r.Group, r.Resource), where)
}

// groupResource writes a resource of a group as RBAC tables do:
// "jobs.batch", "secrets" for the core group.
func groupResource(group, resource string) string {
	if group == "" {
		return resource
	}
	return resource + "." + group
}

// readAudit returns the requests of user in the audit log at path, one per
// audit ID, in the order they were first logged.
func readAudit(t *testing.T, path, user string) []auditRequest {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open audit log: %v", err)
	}
	defer f.Close()
	byID := map[string]int{}
	var out []auditRequest
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("decode audit event: %v\n%s", err, sc.Bytes())
		}
		if ev.User.Username != user {
			continue
		}
		r := auditRequest{Verb: ev.Verb, URL: ev.RequestURI,
			Decision: ev.Annotations["authorization.k8s.io/decision"], Reason: ev.Annotations["authorization.k8s.io/reason"]}
		if ev.ObjectRef != nil {
			r.Group, r.Resource, r.Namespace, r.Name = ev.ObjectRef.APIGroup, ev.ObjectRef.Resource, ev.ObjectRef.Namespace, ev.ObjectRef.Name
			if ev.ObjectRef.Subresource != "" {
				r.Resource += "/" + ev.ObjectRef.Subresource
			}
		}
		if ev.ResponseStatus != nil {
			r.Code, r.Message = ev.ResponseStatus.Code, ev.ResponseStatus.Message
		}
		if i, seen := byID[string(ev.AuditID)]; seen {
			// A later stage has the final answer.
			if r.Code != 0 {
				out[i].Code, out[i].Message = r.Code, r.Message
			}
			continue
		}
		byID[string(ev.AuditID)] = len(out)
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read audit log: %v", err)
	}
	return out
}

// grant is one verb on one resource of one group that a role grants, in a
// namespace or (Namespace empty) everywhere.
type grant struct {
	Namespace     string
	Group         string
	Resource      string
	Verb          string
	ResourceNames []string
	// From names the role and binding that grant it.
	From string
}

// key identifies the grant without its source.
func (g grant) key() string {
	where := "cluster-wide"
	if g.Namespace != "" {
		where = "in " + g.Namespace
	}
	s := fmt.Sprintf("%s %s %s", g.Verb, groupResource(g.Group, g.Resource), where)
	if len(g.ResourceNames) > 0 {
		s += " names " + strings.Join(g.ResourceNames, ",")
	}
	return s
}

// verbs are the RBAC verbs r needed: its own, and "create" when a patch
// or update created the object (201), which the API server authorizes
// separately without a request of its own (server-side apply of a new
// object).
func (r auditRequest) verbs() []string {
	if r.Code == 201 && (r.Verb == "patch" || r.Verb == "update") {
		return []string{r.Verb, "create"}
	}
	return []string{r.Verb}
}

// matches reports whether r is a request g allows.
func (g grant) matches(r auditRequest) bool {
	if r.Resource == "" || !slices.Contains(r.verbs(), g.Verb) || r.Group != g.Group || r.Resource != g.Resource {
		return false
	}
	if g.Namespace != "" && r.Namespace != g.Namespace {
		return false
	}
	return len(g.ResourceNames) == 0 || slices.Contains(g.ResourceNames, r.Name)
}

// grants expands the component's roles, as its bindings apply them, into
// single grants. Non-resource URL rules are returned separately.
func (oc *operatorChart) grants() (out []grant, nonResource []string) {
	clusterRoles := map[string]*rbacv1.ClusterRole{}
	for _, r := range oc.ClusterRoles {
		clusterRoles[r.Name] = r
	}
	roles := map[string]*rbacv1.Role{}
	for _, r := range oc.Roles {
		roles[r.Namespace+"/"+r.Name] = r
	}
	expand := func(namespace, from string, rules []rbacv1.PolicyRule) {
		for _, rule := range rules {
			for _, u := range rule.NonResourceURLs {
				for _, v := range rule.Verbs {
					nonResource = append(nonResource, v+" "+u+" ("+from+")")
				}
			}
			for _, group := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, verb := range rule.Verbs {
						out = append(out, grant{Namespace: namespace, Group: group, Resource: res, Verb: verb,
							ResourceNames: rule.ResourceNames, From: from})
					}
				}
			}
		}
	}
	for _, b := range oc.ClusterRoleBindings {
		if r := clusterRoles[b.RoleRef.Name]; r != nil {
			expand("", "ClusterRole "+r.Name+" by ClusterRoleBinding "+b.Name, r.Rules)
		}
	}
	for _, b := range oc.RoleBindings {
		from := fmt.Sprintf("%s %s by RoleBinding %s/%s", b.RoleRef.Kind, b.RoleRef.Name, b.Namespace, b.Name)
		if b.RoleRef.Kind == "ClusterRole" {
			if r := clusterRoles[b.RoleRef.Name]; r != nil {
				expand(b.Namespace, from, r.Rules)
			}
		} else if r := roles[b.Namespace+"/"+b.RoleRef.Name]; r != nil {
			expand(b.Namespace, from, r.Rules)
		}
	}
	return out, nonResource
}

// checkNoWildcards fails t for every "*" in the component's rules and every
// binding of it to cluster-admin (or to another role of every right).
func (oc *operatorChart) checkNoWildcards(t *testing.T) {
	t.Helper()
	check := func(what string, rules []rbacv1.PolicyRule) {
		for i, rule := range rules {
			for field, values := range map[string][]string{"apiGroups": rule.APIGroups, "resources": rule.Resources,
				"verbs": rule.Verbs, "nonResourceURLs": rule.NonResourceURLs} {
				for _, v := range values {
					if v == "*" || strings.HasSuffix(v, "/*") || strings.HasPrefix(v, "*/") {
						t.Errorf("%s rule %d: wildcard %q in %s (%+v)", what, i, v, field, rule)
					}
				}
			}
		}
	}
	for _, r := range oc.ClusterRoles {
		check("ClusterRole "+r.Name, r.Rules)
		if r.AggregationRule != nil {
			t.Errorf("ClusterRole %s aggregates other roles (%+v): what it grants is not in the chart", r.Name, r.AggregationRule)
		}
	}
	for _, r := range oc.Roles {
		check("Role "+r.Namespace+"/"+r.Name, r.Rules)
	}
	builtIn := []string{"cluster-admin", "admin", "edit", "system:aggregate-to-admin"}
	for _, b := range oc.ClusterRoleBindings {
		if slices.Contains(builtIn, b.RoleRef.Name) {
			t.Errorf("ClusterRoleBinding %s binds the %s to %s", b.Name, oc.Component, b.RoleRef.Name)
		}
	}
	for _, b := range oc.RoleBindings {
		if b.RoleRef.Kind == "ClusterRole" && slices.Contains(builtIn, b.RoleRef.Name) {
			t.Errorf("RoleBinding %s/%s binds the %s to %s", b.Namespace, b.Name, oc.Component, b.RoleRef.Name)
		}
	}
}

// usageTable returns the requests counted by resource and verb, one line
// each, sorted, in aligned columns.
func usageTable(requests []auditRequest) string {
	counts := map[string]int{}
	for _, r := range requests {
		key := r.URL + "\t" + r.Verb
		if r.Resource != "" {
			key = groupResource(r.Group, r.Resource) + "\t" + r.Verb
		}
		counts[key]++
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, k := range sortedKeys(counts) {
		fmt.Fprintf(w, "  %s\t%d\n", k, counts[k])
	}
	_ = w.Flush()
	return b.String()
}
