package deploy

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	monv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// rendered is one kustomization rendered and strictly decoded.
type rendered struct {
	deployments  map[string]*appsv1.Deployment
	services     map[string]*corev1.Service
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]*corev1.Secret
	jobs         map[string]*batchv1.Job
	hpas         map[string]*autoscalingv2.HorizontalPodAutoscaler
	pdbs         map[string]*policyv1.PodDisruptionBudget
	scaled       map[string]*scaledObject
	podMonitors  map[string]*monv1.PodMonitor
	serviceAccts map[string]*corev1.ServiceAccount
	// generated maps a generated ConfigMap's or Secret's name in the kustomization to its name in
	// the render (with the content hash suffix).
	generated map[string]string
}

// render builds dir with kustomize's API (what `kubectl kustomize` runs) from the files on disk,
// and decodes every object into its Go API type: k8s.io/api for Kubernetes' own kinds, the
// Prometheus Operator's for PodMonitor and scaledObject (KEDA's, mirrored) for ScaledObject. Decoding is strict and
// case-sensitive (sigs.k8s.io/json, as the API server decodes): a misspelt or misplaced field,
// a duplicate field or a kind this test does not know fails.
func render(t *testing.T, dir string) rendered {
	t.Helper()
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	r := rendered{map[string]*appsv1.Deployment{}, map[string]*corev1.Service{}, map[string]*corev1.ConfigMap{},
		map[string]*corev1.Secret{}, map[string]*batchv1.Job{}, map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		map[string]*policyv1.PodDisruptionBudget{}, map[string]*scaledObject{}, map[string]*monv1.PodMonitor{},
		map[string]*corev1.ServiceAccount{}, map[string]string{}}
	for _, res := range resMap.Resources() {
		data, err := res.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		gvk := res.GetGvk()
		name := res.GetName()
		if m := hashSuffix.FindStringSubmatch(name); m != nil && (gvk.Kind == "ConfigMap" || gvk.Kind == "Secret") {
			r.generated[m[1]] = name
		}
		var obj any
		switch gvk.ApiVersion() + "/" + gvk.Kind {
		case "apps/v1/Deployment":
			o := &appsv1.Deployment{}
			r.deployments[name], obj = o, o
		case "v1/Service":
			o := &corev1.Service{}
			r.services[name], obj = o, o
		case "v1/ConfigMap":
			o := &corev1.ConfigMap{}
			r.configMaps[name], obj = o, o
		case "v1/Secret":
			o := &corev1.Secret{}
			r.secrets[name], obj = o, o
		case "v1/ServiceAccount":
			o := &corev1.ServiceAccount{}
			r.serviceAccts[name], obj = o, o
		case "batch/v1/Job":
			o := &batchv1.Job{}
			r.jobs[name], obj = o, o
		case "autoscaling/v2/HorizontalPodAutoscaler":
			o := &autoscalingv2.HorizontalPodAutoscaler{}
			r.hpas[name], obj = o, o
		case "policy/v1/PodDisruptionBudget":
			o := &policyv1.PodDisruptionBudget{}
			r.pdbs[name], obj = o, o
		case "keda.sh/v1alpha1/ScaledObject":
			o := &scaledObject{}
			r.scaled[name], obj = o, o
		case "monitoring.coreos.com/v1/PodMonitor":
			o := &monv1.PodMonitor{}
			r.podMonitors[name], obj = o, o
		default:
			t.Errorf("%s: %s %s is not a kind this test knows how to check", dir, gvk, name)
			continue
		}
		strict, err := kjson.UnmarshalStrict(data, obj)
		if err != nil {
			t.Errorf("%s: %s %s: %v", dir, gvk.Kind, name, err)
		}
		for _, e := range strict {
			t.Errorf("%s: %s %s: %v", dir, gvk.Kind, name, e)
		}
	}
	return r
}

// hashSuffix is the content hash kustomize appends to a generated ConfigMap's or Secret's name.
var hashSuffix = regexp.MustCompile(`^(.+)-[a-z0-9]{10}$`)

var overlays = []string{"kubernetes/base", "kubernetes/overlays/dev", "kubernetes/overlays/prod"}

// programOfImage is the program a container runs, from its image worldgate/<program>[:tag].
func programOfImage(t *testing.T, image string) string {
	t.Helper()
	m := regexp.MustCompile(`(?:^|/)worldgate/([a-z-]+)(?::[\w.-]+)?$`).FindStringSubmatch(image)
	if m == nil {
		t.Fatalf("image %q is not a Worldgate image", image)
	}
	return m[1]
}

var secretish = regexp.MustCompile(`(PASSWORD|TOKEN|SECRET|API_KEY|USERS)$`)

// TestKubernetesRenders renders the base and both overlays and checks every workload: each
// worker and MCP server has its Deployment; every container's variables and arguments are real
// flags of its program; credentials come only by reference to a Secret; every ConfigMap key
// referenced exists; probes, resources and the security context are set.
func TestKubernetesRenders(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			r := render(t, dir)
			for _, w := range workers(t) {
				if _, ok := r.deployments[w.name]; !ok {
					t.Errorf("no Deployment %s", w.name)
				}
			}
			for _, m := range mcpServers {
				if _, ok := r.deployments[m]; !ok {
					t.Errorf("no Deployment %s", m)
				}
			}
			if len(r.jobs) != 1 {
				t.Errorf("%d Jobs, want the provision Job", len(r.jobs))
			}
			for name, d := range r.deployments {
				checkPodSpec(t, r, "Deployment "+name, d.Spec.Template.Spec, true)
				sel, err := metav1LabelSelector(d.Spec.Selector)
				if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
					t.Errorf("Deployment %s: selector %v does not match its pod labels %v", name, d.Spec.Selector, d.Spec.Template.Labels)
				}
				if d.Spec.Template.Labels["app.kubernetes.io/part-of"] != "worldgate" {
					t.Errorf("Deployment %s: pods lack app.kubernetes.io/part-of=worldgate (the PodMonitor selects it)", name)
				}
				_, scaled := r.scaled[name]
				_, hpa := r.hpas[name]
				if (scaled || hpa) && d.Spec.Replicas != nil {
					t.Errorf("Deployment %s sets replicas, which its autoscaler owns: an apply would reset it", name)
				}
			}
			for name, j := range r.jobs {
				checkPodSpec(t, r, "Job "+name, j.Spec.Template.Spec, false)
				c := j.Spec.Template.Spec.Containers[0]
				if !slices.Equal(c.Args, []string{"provision"}) {
					t.Errorf("Job %s runs %v, want worldgate provision", name, c.Args)
				}
				if v := envValue(c, "WORLDGATE_NATS_USER"); v != "admin" {
					t.Errorf("Job %s provisions as NATS user %q, want admin", name, v)
				}
			}
			for name, s := range r.services {
				matched := false
				for _, d := range r.deployments {
					if labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
						matched = true
						for _, p := range s.Spec.Ports {
							if p.TargetPort.Type != intstr.String || !hasPort(d.Spec.Template.Spec.Containers, p.TargetPort.StrVal) {
								t.Errorf("Service %s: targetPort %v is not a named port of %s", name, p.TargetPort.String(), d.Name)
							}
						}
					}
				}
				if !matched {
					t.Errorf("Service %s selects no Deployment's pods", name)
				}
			}
			for name, sa := range r.serviceAccts {
				if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
					t.Errorf("ServiceAccount %s mounts an API token; Worldgate never calls the API", name)
				}
			}
		})
	}
}

func metav1LabelSelector(s any) (labels.Selector, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var ls struct {
		MatchLabels map[string]string `json:"matchLabels"`
	}
	if err := json.Unmarshal(b, &ls); err != nil {
		return nil, err
	}
	if len(ls.MatchLabels) == 0 {
		return nil, fmt.Errorf("empty selector")
	}
	return labels.SelectorFromSet(ls.MatchLabels), nil
}

func hasPort(cs []corev1.Container, name string) bool {
	for _, c := range cs {
		for _, p := range c.Ports {
			if p.Name == name {
				return true
			}
		}
	}
	return false
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// checkPodSpec checks one pod template of the render.
func checkPodSpec(t *testing.T, r rendered, where string, ps corev1.PodSpec, long bool) {
	t.Helper()
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		t.Errorf("%s: automountServiceAccountToken must be false", where)
	}
	if ps.ServiceAccountName != "worldgate" {
		t.Errorf("%s: serviceAccountName %q, want worldgate", where, ps.ServiceAccountName)
	}
	psc := ps.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("%s: pod securityContext must set runAsNonRoot and a non-zero runAsUser", where)
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: seccompProfile RuntimeDefault", where)
	}
	if ps.HostNetwork || ps.HostPID || ps.HostIPC {
		t.Errorf("%s: host namespaces", where)
	}
	volumes := map[string]bool{}
	for _, v := range ps.Volumes {
		volumes[v.Name] = true
		if v.HostPath != nil {
			t.Errorf("%s: hostPath volume %s", where, v.Name)
		}
		if v.ConfigMap != nil {
			if _, ok := r.configMaps[v.ConfigMap.Name]; !ok {
				t.Errorf("%s: volume %s: ConfigMap %s is not in the render", where, v.Name, v.ConfigMap.Name)
			}
		}
	}
	for _, c := range ps.Containers {
		cw := where + " container " + c.Name
		prog := programOfImage(t, c.Image)
		checkRequired(t, cw, prog, c.Args, func(env string) bool {
			return slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == env })
		})
		sc := c.SecurityContext
		switch sc {
		case nil:
			t.Errorf("%s: no securityContext", cw)
		default:
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("%s: allowPrivilegeEscalation must be false", cw)
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Errorf("%s: readOnlyRootFilesystem must be true", cw)
			}
			if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
				t.Errorf("%s: capabilities must drop ALL and add none", cw)
			}
			if sc.Privileged != nil && *sc.Privileged {
				t.Errorf("%s: privileged", cw)
			}
			if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
				t.Errorf("%s: runs as root", cw)
			}
		}
		for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if _, ok := c.Resources.Requests[res]; !ok {
				t.Errorf("%s: no %s request", cw, res)
			}
			if _, ok := c.Resources.Limits[res]; !ok {
				t.Errorf("%s: no %s limit", cw, res)
			}
		}
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				t.Errorf("%s: mounts unknown volume %s", cw, m.Name)
			}
		}
		if len(c.EnvFrom) > 0 {
			t.Errorf("%s: envFrom hides which variables a container gets; name each", cw)
		}
		key := prog
		if prog == "worldgate" && len(c.Args) > 0 {
			key = "worldgate " + c.Args[0]
			checkArgs(t, cw, "worldgate", c.Args)
		} else {
			checkArgs(t, cw, prog, c.Args)
		}
		for _, e := range c.Env {
			checkEnv(t, cw, key, e.Name)
			if secretish.MatchString(e.Name) {
				if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					t.Errorf("%s: %s must come from a Secret (secretKeyRef), never a literal", cw, e.Name)
				}
			}
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
				ref := e.ValueFrom.ConfigMapKeyRef
				cm, ok := r.configMaps[ref.Name]
				if !ok {
					t.Errorf("%s: %s: ConfigMap %s is not in the render", cw, e.Name, ref.Name)
				} else if _, ok := cm.Data[ref.Key]; !ok {
					t.Errorf("%s: %s: ConfigMap %s has no key %s", cw, e.Name, ref.Name, ref.Key)
				}
			}
		}
		if !long {
			continue
		}
		p, ok := programNamed(prog)
		if !ok {
			t.Errorf("%s: unknown program %s", cw, prog)
			continue
		}
		checkProbes(t, cw, c, p)
	}
}

// checkProbes checks the probes of a long-running container: readiness on /readyz and liveness
// (and startup) on /healthz of the admin port, a named container port at the program's admin
// port; graphd, which has no admin port, on a TCP connect to its Gremlin port.
func checkProbes(t *testing.T, where string, c corev1.Container, p program) {
	t.Helper()
	if c.ReadinessProbe == nil || c.LivenessProbe == nil {
		t.Errorf("%s: needs readiness and liveness probes", where)
		return
	}
	if p.adminPort == 0 {
		for _, pr := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
			if pr.TCPSocket == nil || !hasPort([]corev1.Container{c}, pr.TCPSocket.Port.StrVal) {
				t.Errorf("%s: a probe of %s connects to a named port", where, p.name)
			}
		}
		return
	}
	admin := false
	for _, port := range c.Ports {
		if port.Name == "admin" && port.ContainerPort == int32(p.adminPort) {
			admin = true
		}
	}
	if !admin {
		t.Errorf("%s: no container port admin: %d (the image binds the admin address there)", where, p.adminPort)
	}
	check := func(kind string, pr *corev1.Probe, path string) {
		if pr == nil {
			return
		}
		if pr.HTTPGet == nil || pr.HTTPGet.Path != path || pr.HTTPGet.Port.StrVal != "admin" {
			t.Errorf("%s: %s probe must GET %s on port admin", where, kind, path)
		}
	}
	check("readiness", c.ReadinessProbe, "/readyz")
	check("liveness", c.LivenessProbe, "/healthz")
	check("startup", c.StartupProbe, "/healthz")
}

// knownJetStreamMetadata are the parameters of KEDA's nats-jetstream scaler.
var knownJetStreamMetadata = []string{"natsServerMonitoringEndpoint", "account", "stream", "consumer",
	"lagThreshold", "activationLagThreshold", "useHttps"}

// TestKubernetesAutoscaling checks that every worker scales on the lag of exactly its durable
// consumers with KEDA's nats-jetstream scaler, and every MCP server on CPU.
func TestKubernetesAutoscaling(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			r := render(t, dir)
			for _, w := range workers(t) {
				so, ok := r.scaled[w.name]
				if !ok {
					t.Errorf("no ScaledObject %s", w.name)
					continue
				}
				if so.Spec.ScaleTargetRef == nil || so.Spec.ScaleTargetRef.Name != w.name || r.deployments[w.name] == nil {
					t.Errorf("ScaledObject %s does not target Deployment %s", w.name, w.name)
				}
				if so.Spec.MinReplicaCount == nil || *so.Spec.MinReplicaCount < 1 || so.Spec.MaxReplicaCount == nil || *so.Spec.MaxReplicaCount < *so.Spec.MinReplicaCount {
					t.Errorf("ScaledObject %s: min/max replicas", w.name)
				}
				var got []consumer
				for _, tr := range so.Spec.Triggers {
					if tr.Type != "nats-jetstream" {
						t.Errorf("ScaledObject %s: trigger %s, want nats-jetstream", w.name, tr.Type)
						continue
					}
					for k := range tr.Metadata {
						if !slices.Contains(knownJetStreamMetadata, k) {
							t.Errorf("ScaledObject %s: unknown nats-jetstream parameter %q", w.name, k)
						}
					}
					for _, k := range []string{"natsServerMonitoringEndpoint", "account", "stream", "consumer", "lagThreshold"} {
						if tr.Metadata[k] == "" {
							t.Errorf("ScaledObject %s: nats-jetstream trigger without %s", w.name, k)
						}
					}
					if !regexp.MustCompile(`^[1-9][0-9]*$`).MatchString(tr.Metadata["lagThreshold"]) {
						t.Errorf("ScaledObject %s: lagThreshold %q", w.name, tr.Metadata["lagThreshold"])
					}
					got = append(got, consumer{tr.Metadata["stream"], tr.Metadata["consumer"]})
				}
				if !slices.Equal(got, w.consumers) {
					t.Errorf("ScaledObject %s scales on %v, want the worker's durable consumers %v", w.name, got, w.consumers)
				}
			}
			for name := range r.scaled {
				if !slices.ContainsFunc(workers(t), func(w worker) bool { return w.name == name }) {
					t.Errorf("ScaledObject %s is not a worker's", name)
				}
			}
			for _, m := range mcpServers {
				h, ok := r.hpas[m]
				if !ok || h.Spec.ScaleTargetRef.Kind != "Deployment" || h.Spec.ScaleTargetRef.Name != m {
					t.Errorf("no HorizontalPodAutoscaler for Deployment %s", m)
				}
			}
		})
	}
}

// TestKubernetesWorkerIdentity checks each worker's own configuration: the NATS user named after
// it (a user of deploy/nats/auth.conf, its password the Secret key of the same name), the gate it
// runs, and which workers hold graph credentials: write only the event-processor, read only the
// invariant gate and the MCP servers that read the world.
func TestKubernetesWorkerIdentity(t *testing.T) {
	auth, err := os.ReadFile("nats/auth.conf")
	if err != nil {
		t.Fatal(err)
	}
	natsUsers := map[string]bool{}
	for _, m := range regexp.MustCompile(`user: "([^"]+)"`).FindAllStringSubmatch(string(auth), -1) {
		natsUsers[m[1]] = true
	}
	r := render(t, "kubernetes/base")
	for _, w := range workers(t) {
		c := r.deployments[w.name].Spec.Template.Spec.Containers[0]
		if user := envValue(c, "WORLDGATE_NATS_USER"); user != w.name || !natsUsers[user] {
			t.Errorf("%s connects as NATS user %q, want %s (a user of deploy/nats/auth.conf)", w.name, user, w.name)
		}
		for _, e := range c.Env {
			if e.Name == "WORLDGATE_NATS_PASSWORD" && e.ValueFrom.SecretKeyRef.Key != w.name {
				t.Errorf("%s: NATS password from key %s, want %s", w.name, e.ValueFrom.SecretKeyRef.Key, w.name)
			}
		}
		if !slices.Equal(c.Args, w.args) {
			t.Errorf("%s: args %v, want %v", w.name, c.Args, w.args)
		}
	}
	graphKeys := map[string]string{}
	for name, d := range r.deployments {
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			if strings.HasSuffix(e.Name, "GRAPH_PASSWORD") {
				graphKeys[name] = e.ValueFrom.SecretKeyRef.Key
			}
		}
	}
	want := map[string]string{"event-processor": "writer-password", "gate-invariant": "reader-password",
		"mcp-world": "reader-password", "mcp-lore": "reader-password"}
	if fmt.Sprint(graphKeys) != fmt.Sprint(want) {
		t.Errorf("graph credentials: %v, want %v", graphKeys, want)
	}
}

// TestKubernetesOverlays checks what differs between the overlays: prod holds no Secret (they
// come from the operator's store, each documented in docs/deploy.md), runs R3 streams with at
// least two replicas and a PodDisruptionBudget per Deployment; dev generates every Secret and
// key the workloads refer to, and its MCP tokens are valid JWTs for its jwt-secret.
func TestKubernetesOverlays(t *testing.T) {
	prod := render(t, "kubernetes/overlays/prod")
	if len(prod.secrets) > 0 {
		t.Errorf("prod renders Secrets %v: credentials must come from the operator's secret store", mapKeys(prod.secrets))
	}
	if prod.configMaps[prod.generated["worldgate-config"]].Data["stream-replicas"] != "3" {
		t.Error("prod: stream-replicas must be 3")
	}
	for name, d := range prod.deployments {
		pdb, ok := prod.pdbs[name]
		if !ok {
			t.Errorf("prod: no PodDisruptionBudget for %s", name)
			continue
		}
		sel, err := metav1LabelSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("prod: PodDisruptionBudget %s does not select its pods", name)
		}
	}
	for name, so := range prod.scaled {
		if *so.Spec.MinReplicaCount < 2 {
			t.Errorf("prod: ScaledObject %s minReplicaCount %d, want ≥ 2", name, *so.Spec.MinReplicaCount)
		}
	}
	for name, h := range prod.hpas {
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 {
			t.Errorf("prod: HPA %s minReplicas, want ≥ 2", name)
		}
	}
	doc, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	for ref := range secretRefs(prod) {
		ref = strings.TrimSuffix(ref, "/*") // a whole Secret mounted as files: its name
		ref = gateSecretRef(ref, prod)
		if !strings.Contains(string(doc), "`"+ref+"`") {
			t.Errorf("docs/deploy.md does not list Secret key `%s`, which prod refers to", ref)
		}
	}

	dev := render(t, "kubernetes/overlays/dev")
	for ref := range secretRefs(dev) {
		name, key, _ := strings.Cut(ref, "/")
		s, ok := dev.secrets[name]
		if !ok {
			t.Errorf("dev: Secret %s is not generated", name)
			continue
		}
		if key == "*" {
			continue
		}
		if _, ok := s.StringData[key]; !ok {
			if _, ok := s.Data[key]; !ok {
				t.Errorf("dev: Secret %s has no key %s", name, key)
			}
		}
	}
	mcp := dev.secrets["worldgate-mcp"]
	secret := secretValue(t, mcp, "jwt-secret")
	for key, scopes := range map[string][]string{"ai-worker-token": {"world:read", "lore:read", "classify:read"}, "gate-safety-token": {"classify:read"}} {
		checkJWT(t, secretValue(t, mcp, key), secret, scopes)
	}
}

// gateSecretRef is a gate's Secret key as docs/deploy.md lists it, once for every gate:
// worldgate-nats/gate-schema is worldgate-nats/gate-<gate>, worldgate-gate-schema-key/schema.key
// is worldgate-gate-<gate>-key/<gate>.key. A gate is a Deployment of component gate; any other
// key is ref itself.
func gateSecretRef(ref string, r rendered) string {
	for name, d := range r.deployments {
		g, ok := strings.CutPrefix(name, "gate-")
		if !ok || d.Labels["app.kubernetes.io/component"] != "gate" {
			continue
		}
		switch ref {
		case "worldgate-nats/" + name:
			return "worldgate-nats/gate-<gate>"
		case "worldgate-gate-" + g + "-key/" + g + ".key":
			return "worldgate-gate-<gate>-key/<gate>.key"
		}
	}
	return ref
}

func mapKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// secretRefs are the Secret keys a render's workloads refer to, as "name/key".
func secretRefs(r rendered) map[string]bool {
	refs := map[string]bool{}
	add := func(ps corev1.PodSpec) {
		for _, c := range ps.Containers {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					refs[e.ValueFrom.SecretKeyRef.Name+"/"+e.ValueFrom.SecretKeyRef.Key] = true
				}
			}
		}
	}
	vols := func(ps corev1.PodSpec) {
		for _, v := range ps.Volumes {
			if v.Secret == nil {
				continue
			}
			if len(v.Secret.Items) == 0 {
				refs[v.Secret.SecretName+"/*"] = true // the whole Secret, as files
			}
			for _, it := range v.Secret.Items {
				refs[v.Secret.SecretName+"/"+it.Key] = true
			}
		}
	}
	for _, d := range r.deployments {
		add(d.Spec.Template.Spec)
		vols(d.Spec.Template.Spec)
	}
	for _, j := range r.jobs {
		add(j.Spec.Template.Spec)
		vols(j.Spec.Template.Spec)
	}
	return refs
}

func secretValue(t *testing.T, s *corev1.Secret, key string) string {
	t.Helper()
	if s == nil {
		t.Fatal("no Secret")
	}
	if v, ok := s.StringData[key]; ok {
		return v
	}
	if v, ok := s.Data[key]; ok {
		return string(v)
	}
	t.Fatalf("Secret %s has no key %s", s.Name, key)
	return ""
}

// checkJWT verifies an HS256 token as shared/mcpx does: signature, and the scopes it needs.
func checkJWT(t *testing.T, token, secret string, scopes []string) {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q is not a JWT", token)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(parts[0] + "." + parts[1]))
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || !hmac.Equal(sig, mac.Sum(nil)) {
		t.Errorf("token for %v is not signed with the dev jwt-secret", scopes)
	}
	body, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims struct {
		Scope string `json:"scope"`
	}
	if err := json.Unmarshal(body, &claims); err != nil {
		t.Fatal(err)
	}
	for _, s := range scopes {
		if !slices.Contains(strings.Fields(claims.Scope), s) {
			t.Errorf("token lacks scope %s (has %q)", s, claims.Scope)
		}
	}
}

// TestKubernetesSigningKeys checks the attestation keys (docs/attestation.md): each gate's pods
// mount that gate's private key and no other, -signing-keys names the mount; the
// event-processor and the ai-worker mount the public keys (-attest-keys) and no private key; no other workload
// mounts a key. In dev, each generated private key belongs to the public key the
// event-processor is given.
func TestKubernetesSigningKeys(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			r := render(t, dir)
			secretName := func(v corev1.Volume) string {
				if v.Secret == nil {
					return ""
				}
				name := v.Secret.SecretName
				for gen, rendered := range r.generated {
					if rendered == name {
						return gen
					}
				}
				return name
			}
			mountOf := func(ps corev1.PodSpec, vol string) string {
				for _, m := range ps.Containers[0].VolumeMounts {
					if m.Name == vol {
						return m.MountPath
					}
				}
				return ""
			}
			gates := map[string]bool{}
			for _, g := range gateNames(t) {
				gates["gate-"+g] = true
			}
			for name, d := range r.deployments {
				ps := d.Spec.Template.Spec
				var keyVols []corev1.Volume
				for _, v := range ps.Volumes {
					if n := secretName(v); strings.HasPrefix(n, "worldgate-gate-") || n == "worldgate-attest-keys" {
						keyVols = append(keyVols, v)
					}
				}
				switch {
				case gates[name]:
					g := strings.TrimPrefix(name, "gate-")
					if len(keyVols) != 1 || secretName(keyVols[0]) != "worldgate-gate-"+g+"-key" ||
						len(keyVols[0].Secret.Items) != 1 || keyVols[0].Secret.Items[0].Key != g+".key" || keyVols[0].Secret.Items[0].Path != g+".key" {
						t.Errorf("Deployment %s: key volumes %+v; want Secret worldgate-gate-%s-key with item %s.key only", name, keyVols, g, g)
						continue
					}
					if m := mountOf(ps, keyVols[0].Name); m == "" || envValue(ps.Containers[0], "WORLDGATE_SIGNING_KEYS") != m {
						t.Errorf("Deployment %s: WORLDGATE_SIGNING_KEYS %q, key mounted at %q", name, envValue(ps.Containers[0], "WORLDGATE_SIGNING_KEYS"), m)
					}
					if ps.SecurityContext.FSGroup == nil {
						t.Errorf("Deployment %s: no fsGroup, so the Secret's root-owned key file is unreadable to the gate", name)
					}
				case name == "event-processor" || name == "ai-worker":
					if len(keyVols) != 1 || secretName(keyVols[0]) != "worldgate-attest-keys" {
						t.Errorf("%s: key volumes %+v; want the public keys only", name, keyVols)
						continue
					}
					if m := mountOf(ps, keyVols[0].Name); m == "" || envValue(ps.Containers[0], "WORLDGATE_ATTEST_KEYS") != m {
						t.Errorf("%s: WORLDGATE_ATTEST_KEYS %q, keys mounted at %q", name, envValue(ps.Containers[0], "WORLDGATE_ATTEST_KEYS"), m)
					}
				default:
					if len(keyVols) > 0 {
						t.Errorf("Deployment %s mounts attestation keys %+v", name, keyVols)
					}
				}
			}
			if !strings.HasSuffix(dir, "dev") {
				return
			}
			secret := func(name string) *corev1.Secret {
				if g, ok := r.generated[name]; ok {
					name = g
				}
				return r.secrets[name]
			}
			pubs := secret("worldgate-attest-keys")
			if pubs == nil {
				t.Fatal("dev: no Secret worldgate-attest-keys")
			}
			for file, data := range pubs.Data {
				if !strings.HasSuffix(file, ".pub") || strings.Contains(string(data), "PRIVATE KEY") {
					t.Errorf("dev: worldgate-attest-keys holds %s", file)
				}
			}
			for _, g := range gateNames(t) {
				sec := secret("worldgate-gate-" + g + "-key")
				if sec == nil {
					t.Errorf("dev: no Secret worldgate-gate-%s-key", g)
					continue
				}
				block, _ := pem.Decode(sec.Data[g+".key"])
				if block == nil {
					t.Errorf("dev: worldgate-gate-%s-key has no PEM %s.key", g, g)
					continue
				}
				priv, err := x509.ParsePKCS8PrivateKey(block.Bytes)
				ed, ok := priv.(ed25519.PrivateKey)
				if err != nil || !ok {
					t.Errorf("dev: %s.key is not an Ed25519 PKCS #8 key: %v", g, err)
					continue
				}
				pb, _ := pem.Decode(pubs.Data[g+".pub"])
				if pb == nil {
					t.Errorf("dev: worldgate-attest-keys has no %s.pub", g)
					continue
				}
				pub, err := x509.ParsePKIXPublicKey(pb.Bytes)
				if err != nil || !ed.Public().(ed25519.PublicKey).Equal(pub) {
					t.Errorf("dev: %s.pub is not the public half of %s.key (%v)", g, g, err)
				}
			}
		})
	}
}
