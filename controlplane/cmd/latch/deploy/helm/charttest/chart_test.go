// Package charttest lints and renders the Latch Helm chart (../latch) with
// the Helm library and decodes every rendered object strictly into its
// Kubernetes API type (an unknown field is an error), ServiceMonitor and
// PrometheusRule into the prometheus-operator's. It is its own module so
// that Helm and the Kubernetes API stay out of Latch's go.mod; .ci/run
// runs it with `(cd controlplane/cmd/latch/deploy/helm/charttest && go test ./...)`.
package charttest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	chartDir   = "../latch"
	repoRoot   = "../../../../../.."
	monitoring = repoRoot + "/controlplane/cmd/latch/monitoring"
	namespace  = "agents"
	release    = "prod"
)

func ciValues(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile("testdata/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load the chart: %v", err)
	}
	return c
}

func render(t *testing.T, c *chart.Chart, vals map[string]any) (map[string]string, error) {
	t.Helper()
	rv, err := chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{Name: release, Namespace: namespace, IsInstall: true, Revision: 1}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	return engine.Render(c, rv)
}

// TestLint is `helm lint` with the production values: no warning, no error.
func TestLint(t *testing.T) {
	l := lint.All(chartDir, ciValues(t), namespace, false)
	for _, m := range l.Messages {
		t.Logf("lint: %s", m)
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", m)
		}
	}
}

// TestDefaultValuesNeedACatalog: installing without a catalog fails with a
// message that says what to set, instead of pods that crash.
func TestDefaultValuesNeedACatalog(t *testing.T) {
	_, err := render(t, loadChart(t), nil)
	if err == nil || !strings.Contains(err.Error(), "serve.catalog") {
		t.Fatalf("render with the default values: %v, want an error naming serve.catalog", err)
	}
}

// objects are the rendered objects, decoded strictly.
type objects struct {
	statefulSets    []*appsv1.StatefulSet
	deployments     []*appsv1.Deployment
	services        []*corev1.Service
	configMaps      []*corev1.ConfigMap
	pdbs            []*policyv1.PodDisruptionBudget
	serviceMonitors []*monitoringv1.ServiceMonitor
	rules           []*monitoringv1.PrometheusRule
}

// strict decodes one YAML document into out, refusing unknown fields and
// duplicate keys.
func strict(doc []byte, out any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the object")
	}
	return nil
}

func decode(t *testing.T, files map[string]string) objects {
	t.Helper()
	var o objects
	for name, content := range files {
		if !strings.HasSuffix(name, ".yaml") {
			continue // NOTES.txt, helpers
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(content)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if tm.Kind == "" {
				if strings.TrimSpace(stripComments(string(doc))) != "" {
					t.Errorf("%s: a document without a kind:\n%s", name, doc)
				}
				continue
			}
			var obj any
			switch tm.APIVersion + " " + tm.Kind {
			case "apps/v1 StatefulSet":
				v := &appsv1.StatefulSet{}
				o.statefulSets, obj = append(o.statefulSets, v), v
			case "apps/v1 Deployment":
				v := &appsv1.Deployment{}
				o.deployments, obj = append(o.deployments, v), v
			case "v1 Service":
				v := &corev1.Service{}
				o.services, obj = append(o.services, v), v
			case "v1 ConfigMap":
				v := &corev1.ConfigMap{}
				o.configMaps, obj = append(o.configMaps, v), v
			case "policy/v1 PodDisruptionBudget":
				v := &policyv1.PodDisruptionBudget{}
				o.pdbs, obj = append(o.pdbs, v), v
			case "monitoring.coreos.com/v1 ServiceMonitor":
				v := &monitoringv1.ServiceMonitor{}
				o.serviceMonitors, obj = append(o.serviceMonitors, v), v
			case "monitoring.coreos.com/v1 PrometheusRule":
				v := &monitoringv1.PrometheusRule{}
				o.rules, obj = append(o.rules, v), v
			default:
				t.Errorf("%s: %s %s has no typed check here: add it", name, tm.APIVersion, tm.Kind)
				continue
			}
			if err := strict(doc, obj); err != nil {
				t.Errorf("%s: %s is not a valid %s: %v\n%s", name, tm.Kind, tm.APIVersion, err, doc)
			}
		}
	}
	return o
}

var commentLine = regexp.MustCompile(`(?m)^\s*#.*$`)

func stripComments(s string) string { return commentLine.ReplaceAllString(s, "") }

// TestRender renders the chart with the production values and checks the
// objects a cluster would get.
func TestRender(t *testing.T) {
	c := loadChart(t)
	start := time.Now()
	files, err := render(t, c, ciValues(t))
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	t.Logf("rendered %d templates in %v", len(files), time.Since(start))
	o := decode(t, files)
	counts := map[string][2]int{
		"StatefulSet": {len(o.statefulSets), 1}, "Deployment": {len(o.deployments), 1},
		"Service": {len(o.services), 3}, "ConfigMap": {len(o.configMaps), 2},
		"PodDisruptionBudget": {len(o.pdbs), 2}, "ServiceMonitor": {len(o.serviceMonitors), 1},
		"PrometheusRule": {len(o.rules), 1},
	}
	for kind, n := range counts {
		if n[0] != n[1] {
			t.Errorf("rendered %d %s, want %d", n[0], kind, n[1])
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	sts, dep := o.statefulSets[0], o.deployments[0]

	t.Run("serve", func(t *testing.T) {
		if *sts.Spec.Replicas != 3 {
			t.Errorf("replicas = %d, want the values' 3", *sts.Spec.Replicas)
		}
		ctr := sts.Spec.Template.Spec.Containers[0]
		if ctr.Image != "registry.example/latch:v1.2.3" {
			t.Errorf("image = %q", ctr.Image)
		}
		probe := func(p *corev1.Probe, path string) {
			if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "ops" || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
				t.Errorf("probe = %+v, want HTTPS GET %s on the ops port", p, path)
			}
		}
		probe(ctr.LivenessProbe, "/healthz")
		probe(ctr.ReadinessProbe, "/readyz")
		if !hasPort(ctr.Ports, "ops", 7410) || !hasPort(ctr.Ports, "grpc", 7400) {
			t.Errorf("ports = %+v, want grpc 7400 and ops 7410", ctr.Ports)
		}
		args := strings.Join(ctr.Args, " ")
		for _, want := range []string{
			"--store=$(LATCH_STORE)", "--vault-passphrase-file=/etc/latch/vault/passphrase",
			"--tls-cert-file=/etc/latch/tls/tls.crt", "--tls-key-file=/etc/latch/tls/tls.key", "--tls-client-ca-file=/etc/latch/tls/ca.crt",
			"--ops-listen=0.0.0.0:7410", "--lease-ttl=4s",
			"--advertise-addr=$(POD_NAME).prod-latch-serve.agents.svc:7400",
			"--operator-identity=alice=spiffe://latch.internal/operator/alice",
		} {
			if !strings.Contains(args, want) {
				t.Errorf("latch serve args %q lack %q", args, want)
			}
		}
		env := map[string]corev1.EnvVar{}
		for _, e := range ctr.Env {
			env[e.Name] = e
		}
		if r := env["LATCH_STORE"].ValueFrom; r == nil || r.SecretKeyRef == nil || r.SecretKeyRef.Name != "latch-store" || r.SecretKeyRef.Key != "url" {
			t.Errorf("LATCH_STORE = %+v, want the latch-store Secret's url", env["LATCH_STORE"])
		}
		vols := map[string]corev1.Volume{}
		for _, v := range sts.Spec.Template.Spec.Volumes {
			vols[v.Name] = v
		}
		if s := vols["tls"].Secret; s == nil || s.SecretName != "latch-serve-tls" || len(s.Items) != 0 {
			t.Errorf("tls volume = %+v, want the whole latch-serve-tls Secret (tls.crt, tls.key, ca.crt)", vols["tls"])
		}
		if s := vols["vault"].Secret; s == nil || s.SecretName != "latch-vault" || len(s.Items) != 1 || s.Items[0].Path != "passphrase" {
			t.Errorf("vault volume = %+v", vols["vault"])
		}
		if _, ok := vols["data"]; ok || len(sts.Spec.VolumeClaimTemplates) != 1 {
			t.Errorf("persistence on: want the data volume from a claim template, got volume %+v and %d templates", vols["data"], len(sts.Spec.VolumeClaimTemplates))
		}
		mounts(t, ctr, vols)
		psc, sc := sts.Spec.Template.Spec.SecurityContext, ctr.SecurityContext
		if psc == nil || psc.RunAsUser == nil || *psc.RunAsUser != 65532 || sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("security context = %+v / %+v, want the image's user 65532 and a read-only root", psc, sc)
		}
		if sts.Spec.ServiceName != "prod-latch-serve" {
			t.Errorf("serviceName = %q", sts.Spec.ServiceName)
		}
	})

	t.Run("mcp", func(t *testing.T) {
		ctr := dep.Spec.Template.Spec.Containers[0]
		want := "--control-plane=prod-latch-serve-0.prod-latch-serve.agents.svc:7400,prod-latch-serve-1.prod-latch-serve.agents.svc:7400,prod-latch-serve-2.prod-latch-serve.agents.svc:7400"
		if !slices.Contains(ctr.Args, want) {
			t.Errorf("latch-mcp args %q lack %q (every replica's name)", ctr.Args, want)
		}
		if !slices.Contains(ctr.Args, "--max-sessions=8192") {
			t.Errorf("latch-mcp args %q lack the extra argument", ctr.Args)
		}
		vols := map[string]corev1.Volume{}
		for _, v := range dep.Spec.Template.Spec.Volumes {
			vols[v.Name] = v
		}
		mounts(t, ctr, vols)
	})

	t.Run("selectors", func(t *testing.T) {
		pods := map[string]labels.Set{
			"serve": sts.Spec.Template.Labels,
			"mcp":   dep.Spec.Template.Labels,
		}
		if s, _ := metav1.LabelSelectorAsSelector(sts.Spec.Selector); !s.Matches(pods["serve"]) {
			t.Errorf("the StatefulSet's selector does not match its pods")
		}
		if s, _ := metav1.LabelSelectorAsSelector(dep.Spec.Selector); !s.Matches(pods["mcp"]) {
			t.Errorf("the Deployment's selector does not match its pods")
		}
		for _, svc := range o.services {
			sel := labels.SelectorFromSet(svc.Spec.Selector)
			n := 0
			for _, l := range pods {
				if sel.Matches(l) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("Service %s selects %d workloads, want 1", svc.Name, n)
			}
			for _, p := range svc.Spec.Ports {
				if p.TargetPort.String() != "grpc" && p.TargetPort.String() != "ops" && p.TargetPort.String() != "mcp" {
					t.Errorf("Service %s port %s targets %s, not a named container port", svc.Name, p.Name, p.TargetPort.String())
				}
			}
		}
		for _, p := range o.pdbs {
			s, _ := metav1.LabelSelectorAsSelector(p.Spec.Selector)
			if !s.Matches(pods["serve"]) && !s.Matches(pods["mcp"]) {
				t.Errorf("PodDisruptionBudget %s selects no pods", p.Name)
			}
		}
		sm := o.serviceMonitors[0]
		s, _ := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		matched := 0
		for _, svc := range o.services {
			if s.Matches(labels.Set(svc.Labels)) && svc.Spec.ClusterIP == "None" {
				matched++
			}
		}
		if matched != 1 || sm.Spec.Endpoints[0].Path != "/metrics" || sm.Spec.Endpoints[0].Port != "ops" {
			t.Errorf("ServiceMonitor %+v: want /metrics on the ops port of the headless Service", sm.Spec)
		}
	})

	t.Run("monitoring", func(t *testing.T) {
		// The rule file as shipped decodes strictly as a PrometheusRule's
		// spec, and the chart carries all of it.
		b, err := os.ReadFile(filepath.Join(monitoring, "alerts.yml"))
		if err != nil {
			t.Fatal(err)
		}
		var shipped monitoringv1.PrometheusRuleSpec
		if err := strict(b, &shipped); err != nil {
			t.Fatalf("alerts.yml is not a PrometheusRule spec: %v", err)
		}
		got, _ := json.Marshal(o.rules[0].Spec)
		want, _ := json.Marshal(shipped)
		if !bytes.Equal(got, want) || len(shipped.Groups) == 0 {
			t.Errorf("the PrometheusRule's spec differs from alerts.yml:\n got %s\nwant %s", got, want)
		}
		d, err := os.ReadFile(filepath.Join(monitoring, "dashboard.json"))
		if err != nil {
			t.Fatal(err)
		}
		var dash *corev1.ConfigMap
		for _, cm := range o.configMaps {
			if cm.Labels["grafana_dashboard"] == "1" {
				dash = cm
			}
		}
		if dash == nil {
			t.Fatal("no ConfigMap labelled grafana_dashboard=1")
		}
		var a, b2 any
		if err := json.Unmarshal([]byte(dash.Data["latch.json"]), &a); err != nil {
			t.Fatalf("the dashboard ConfigMap's latch.json is not JSON: %v", err)
		}
		if err := json.Unmarshal(d, &b2); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(a) != fmt.Sprint(b2) {
			t.Errorf("the dashboard ConfigMap differs from dashboard.json")
		}
	})

	t.Run("flags", func(t *testing.T) {
		// Every flag the chart passes is one the binaries define.
		bin := t.TempDir()
		build := exec.Command("go", "build", "-o", bin+"/", "./controlplane/cmd/latch", "./mcpfront/cmd/latch-mcp")
		build.Dir = repoRoot
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		help := func(args ...string) string {
			out, _ := exec.Command(args[0], args[1:]...).CombinedOutput() // -h exits non-zero
			return string(out)
		}
		check := func(what, usage string, args []string) {
			for _, a := range args {
				name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				if !strings.HasPrefix(a, "--") {
					continue
				}
				if !regexp.MustCompile(`(?m)^  -` + regexp.QuoteMeta(name) + `\b`).MatchString(usage) {
					t.Errorf("%s has no flag --%s (the chart passes %q)", what, name, a)
				}
			}
		}
		check("latch serve", help(bin+"/latch", "serve", "-h"), sts.Spec.Template.Spec.Containers[0].Args)
		check("latch-mcp", help(bin+"/latch-mcp", "-h"), dep.Spec.Template.Spec.Containers[0].Args)
	})
}

func hasPort(ps []corev1.ContainerPort, name string, n int32) bool {
	for _, p := range ps {
		if p.Name == name && p.ContainerPort == n {
			return true
		}
	}
	return false
}

// mounts checks that every file path in ctr's arguments under /etc/latch
// lies in a mounted volume, and every mount names a volume of the pod (or
// a claim template's).
func mounts(t *testing.T, ctr corev1.Container, vols map[string]corev1.Volume) {
	t.Helper()
	for _, m := range ctr.VolumeMounts {
		if _, ok := vols[m.Name]; !ok && m.Name != "data" {
			t.Errorf("%s mounts volume %s, which the pod does not have", ctr.Name, m.Name)
		}
	}
	for _, a := range ctr.Args {
		_, v, ok := strings.Cut(a, "=")
		if !ok || !strings.HasPrefix(v, "/etc/latch/") {
			continue
		}
		in := false
		for _, m := range ctr.VolumeMounts {
			if strings.HasPrefix(v, m.MountPath+"/") {
				in = true
			}
		}
		if !in {
			t.Errorf("%s: %s is not in any mounted volume", ctr.Name, a)
		}
	}
}

// TestHowToValuesRender: the values file docs/how-to/install-with-helm.md
// writes renders, and every object decodes strictly.
func TestHowToValuesRender(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs/how-to/install-with-helm.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "cat > latch-values.yaml <<'EOF'\n")
	doc, _, ok2 := strings.Cut(rest, "\nEOF\n")
	if !ok || !ok2 {
		t.Fatal("install-with-helm.md has no `cat > latch-values.yaml <<'EOF'` block")
	}
	var vals map[string]any
	if err := yaml.UnmarshalStrict([]byte(doc), &vals); err != nil {
		t.Fatalf("the how-to's values: %v", err)
	}
	files, err := render(t, loadChart(t), vals)
	if err != nil {
		t.Fatalf("render the how-to's values: %v", err)
	}
	if o := decode(t, files); len(o.statefulSets) != 1 || *o.statefulSets[0].Spec.Replicas != 2 {
		t.Errorf("the how-to's values render %d StatefulSets", len(o.statefulSets))
	}
}

// TestUnknownValuesRefused: values.schema.json refuses a key the chart
// does not read (a typo would otherwise be ignored) and a wrong type.
func TestUnknownValuesRefused(t *testing.T) {
	c := loadChart(t)
	for _, tc := range []struct {
		name string
		edit func(v map[string]any)
		want string
	}{
		{"typo", func(v map[string]any) { v["serve"].(map[string]any)["replica"] = 3 }, "replica"},
		{"wrong type", func(v map[string]any) { v["mcp"].(map[string]any)["port"] = "7411" }, "port"},
		{"top level", func(v map[string]any) { v["tokens"] = "x" }, "tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := ciValues(t)
			tc.edit(v)
			_, err := render(t, c, v)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("render = %v, want the schema to refuse %s", err, tc.want)
			}
		})
	}
}
