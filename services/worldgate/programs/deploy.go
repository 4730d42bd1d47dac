package programs

import (
	"fmt"

	"github.com/worldgate/worldgate/services/ai-worker/aiworker"
	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/runtime"
)

// Deployment is what a service's deployments need beyond what every service shares: its
// service in deploy/compose/compose.yaml and its manifest in deploy/kubernetes/base/services
// are generated from it (`worldgate deploy-manifests`, run by `go generate
// ./services/worldgate/policy`). The generator adds what they all share: the image of the
// program's name, the non-root user, the read-only root, no capabilities, the probes on the
// admin port, the NATS URL, the log level and the dependencies its fields imply (the topology,
// the keys, the graph, the MCP servers it calls).
type Deployment struct {
	// ComposeNote and K8sNote are comments above its compose service and its Kubernetes
	// manifest, one line each.
	ComposeNote, K8sNote []string
	EnvPrefix            string // WORLDGATE_, or WORLDGATE_MCP_ for an MCP server
	NATSUser             string // its NATS user (deploy/nats); its password is its Secret's
	AdminPort            int    // the image's admin port (/metrics, /healthz, /readyz)
	Listen               *Port  // the port it serves, if it serves one
	// MCPServer: it checks MCP bearer tokens (the token file in compose, the JWT secret in
	// Kubernetes).
	MCPServer bool
	// Replicas: it provisions its streams, with the deployment's stream replicas.
	Replicas bool
	// NoProvision: it never provisions (WORLDGATE_PROVISION=false).
	NoProvision bool
	Graph       GraphUser   // the graph user it connects as, if any
	MCP         []MCPUse    // the MCP servers it calls
	MCPToken    string      // the variable of its MCP bearer token (after EnvPrefix), if it calls any
	AttestKeys  bool        // it verifies the gates' attestations (their public keys)
	SigningKeys bool        // it signs as gates (their private keys; compose only)
	Templates   bool        // it reads the prompt templates file (compose only)
	File        *SecretFile // a secret file it reads
	// ComposeEnv is compose-only environment (its values may interpolate .env).
	ComposeEnv []EnvVar
	// ComposeScale is its compose replicas, when not one.
	ComposeScale int
	// K8s is its Kubernetes manifest; nil when another generator writes it (the gates:
	// `worldgate k8s-gates`).
	K8s *K8s
}

// GraphUser is a graph user a service connects as.
type GraphUser string

// The graph's users: the reader everyone reads as, the writer only the event-processor holds.
const (
	GraphReader GraphUser = "reader"
	GraphWriter GraphUser = "writer"
)

// Port is a served port.
type Port struct {
	Name    string // the container port's name (mcp, http)
	Number  int
	Publish bool // published on the laptop's 127.0.0.1 by compose
}

// MCPUse is an MCP server a service calls: variable Env (after the prefix) holds its URL.
type MCPUse struct{ Env, Server string }

// SecretFile is a file from a secret: compose's secret Compose (./<Compose>.json) at
// /run/secrets/<Compose>; Kubernetes' Secret K8sSecret, its key Key, mounted in Dir as
// volume Volume. Variable Env (after the prefix) holds the file's path.
type SecretFile struct{ Env, Compose, K8sSecret, Key, Volume, Dir string }

// EnvVar is one variable.
type EnvVar struct{ Name, Value string }

// K8s is what a service's Kubernetes manifest needs.
type K8s struct {
	Resources Resources // DefaultResources when zero
	// KEDA scales it on its consumers' lag; nil for a server, which has a Service and an HPA
	// on CPU.
	KEDA *KEDA
}

// Resources are its container's requests and limits.
type Resources struct{ CPU, Memory, CPULimit, MemoryLimit string }

// KEDA is a worker's ScaledObject.
type KEDA struct {
	Note     []string // comment above it, one line each
	Max      int      // maxReplicaCount
	Triggers []Trigger
	// Sum, when set, scales on the triggers' summed lag, Sum pending per replica
	// (scalingModifiers), rather than on the largest.
	Sum string
}

// Trigger is the lag of a durable consumer. Name is set when Sum adds triggers up.
type Trigger struct{ Name, Stream, Consumer, Lag string }

// DefaultResources are a service's when its K8s.Resources are zero.
var DefaultResources = Resources{CPU: "50m", Memory: "64Mi", CPULimit: "1", MemoryLimit: "256Mi"}

func mcpServerDeployment(name string, admin, port int, graph bool, composeNote, k8sNote []string) *Deployment {
	d := &Deployment{ComposeNote: composeNote, K8sNote: k8sNote, EnvPrefix: "WORLDGATE_MCP_",
		NATSUser: name, AdminPort: admin, Listen: &Port{Name: "mcp", Number: port}, MCPServer: true,
		K8s: &K8s{}}
	if graph {
		d.Graph = GraphReader
	}
	return d
}

var (
	deployEventProcessor = &Deployment{
		ComposeNote: []string{
			"The only service with the graph's write credentials. Its replicas share the 16 partitions",
			"of the validated proposals, each partition consumed by one replica at a time (one actor's",
			"proposals commit in order whatever the replicas): two by default, `docker compose up",
			"--scale event-processor=4` for four; docs/deploy.md, \"The writer's partitions\".",
		},
		K8sNote: []string{
			"The event-processor: the only holder of the graph's write credentials and the only publisher of",
			"world.committed.>. It always checks the topology at start, so -replicas follows stream-replicas.",
		},
		EnvPrefix: "WORLDGATE_", NATSUser: "event-processor", AdminPort: 9105, Replicas: true,
		Graph: GraphWriter, AttestKeys: true, ComposeScale: 2,
		K8s: &K8s{Resources: Resources{CPU: "100m", Memory: "64Mi", CPULimit: "1", MemoryLimit: "256Mi"},
			KEDA: &KEDA{Note: []string{
				"Replicas share the 16 partitions of the validated proposals (one durable consumer each; each",
				"partition consumed by one replica at a time, so one actor's proposals commit in order whatever",
				"the replicas): KEDA scales on their summed lag (a trigger per partition, added up by",
				"scalingModifiers), one replica per 100 pending proposals, up to 8 (at most the partitions; a",
				"replica with no partition idles). With -partitions other than 16, list one trigger per",
				"partition. docs/deploy.md: partitions, replicas and rebalancing.",
			}, Max: 8, Sum: "100", Triggers: processorTriggers()}},
	}
	deployMemoryWriter = &Deployment{
		ComposeNote: []string{"Keeps the interaction memory (get-recent-dialogue) from committed events."},
		K8sNote: []string{
			"The memory-writer: keeps the interaction memory (KV bucket worldgate-memory, read by",
			"mcp-world's get-recent-dialogue) from committed events. It reads COMMITTED on its durable and",
			"writes only that bucket; replicas share the durable and write with compare-and-set.",
		},
		EnvPrefix: "WORLDGATE_", NATSUser: "memory-writer", AdminPort: 9106, Replicas: true,
		K8s: &K8s{Resources: Resources{CPU: "50m", Memory: "32Mi", CPULimit: "500m", MemoryLimit: "128Mi"},
			KEDA: &KEDA{Max: 3, Triggers: []Trigger{{Stream: "COMMITTED", Consumer: "memory-writer", Lag: "100"}}}},
	}
	deployGate = &Deployment{
		ComposeNote: []string{
			"Every gate in one process on the laptop, fused (user gates: the gates' permissions together,",
			"without the hops between them, which a fused run decides in one hop);",
			"Kubernetes runs one Deployment per gate (deploy/kubernetes). Scale with --scale gate=N:",
			"replicas share each gate's durable consumer.",
		},
		EnvPrefix: "WORLDGATE_", NATSUser: "gates", AdminPort: 9410, Replicas: true, Graph: GraphReader,
		MCP: []MCPUse{{"CLASSIFY_URL", "mcp-classify"}}, MCPToken: "CLASSIFY_TOKEN",
		SigningKeys: true, Templates: true,
		ComposeEnv: []EnvVar{{"WORLDGATE_GATE", "all"}},
	}
	deployAIWorker = &Deployment{
		ComposeNote: []string{
			"The offline scripted model by default; set WORLDGATE_LLM_PROVIDER (openai or anthropic),",
			"WORLDGATE_LLM_MODEL, WORLDGATE_LLM_BASE_URL and WORLDGATE_LLM_API_KEY in .env for a real one.",
		},
		K8sNote: []string{
			"The ai-worker: every agent role, each on its durable consumer ai-<role> of WORLD, and the",
			"rejections on ai-rejections, followed only when the gates' public keys verify their trail.",
			"The base runs the offline scripted model; overlays/prod sets a real one.",
		},
		EnvPrefix: "WORLDGATE_", NATSUser: "ai-worker", AdminPort: 9420, NoProvision: true,
		MCP:      []MCPUse{{"MCP_WORLD_URL", "mcp-world"}, {"MCP_LORE_URL", "mcp-lore"}, {"MCP_CLASSIFY_URL", "mcp-classify"}},
		MCPToken: "MCP_TOKEN", AttestKeys: true,
		ComposeEnv: []EnvVar{
			{"WORLDGATE_LLM_PROVIDER", "${WORLDGATE_LLM_PROVIDER:-scripted}"},
			{"WORLDGATE_LLM_MODEL", "${WORLDGATE_LLM_MODEL:-}"},
			{"WORLDGATE_LLM_BASE_URL", "${WORLDGATE_LLM_BASE_URL:-}"},
			{"WORLDGATE_LLM_API_KEY", "${WORLDGATE_LLM_API_KEY:-}"},
		},
		K8s: &K8s{Resources: Resources{CPU: "100m", Memory: "128Mi", CPULimit: "2", MemoryLimit: "512Mi"},
			KEDA: &KEDA{Note: []string{
				"The ai-worker scales on the largest lag of its consumers; a task waits on the model, so a low",
				"threshold per replica. Watch AI cost (worldgate_ai_cost_usd_total) when raising maxReplicaCount.",
			}, Max: 20, Triggers: aiWorkerTriggers()}},
	}
	deployMCPWorld = mcpServerDeployment("mcp-world", 9401, 7401, true, nil, []string{
		"mcp-world: the world tools (graph as the reader, the COMMITTED stream as NATS user mcp-world). Bearer JWTs signed with the jwt-secret of Secret worldgate-mcp.",
	})
	deployMCPLore = mcpServerDeployment("mcp-lore", 9402, 7402, true, nil, []string{
		"mcp-lore: the lore tools (LoreFact vertices, graph as the reader). Bearer JWTs signed with the jwt-secret of Secret worldgate-mcp.",
	})
	deployMCPClassify = mcpServerDeployment("mcp-classify", 9403, 7403, false, nil, []string{
		"mcp-classify: intent classification and moderation (no data access). Bearer JWTs signed with the jwt-secret of Secret worldgate-mcp.",
	})
	deployMCPPropose = func() *Deployment {
		d := mcpServerDeployment("mcp-propose", 9404, 7404, false, []string{
			"Outside narrators' proposals (scope propose in the token file, separate from the read",
			"scopes); it proposes as NATS user mcp-propose, the narrator emitter.",
		}, []string{
			"mcp-propose: outside narrators' proposals, published as NATS user mcp-propose (the narrator emitter, proposals.emit.narrator only). Bearer JWTs (scope propose) signed with the jwt-secret of Secret worldgate-mcp.",
		})
		d.Listen.Publish = true
		return d
	}()
	deployEdge = &Deployment{
		ComposeNote: []string{
			"The HTTP API for game servers and browsers (README \"Getting outcomes back\"): on",
			"http://127.0.0.1:8080 (the /play console too), with the development key of edge-keys.json,",
			"`Authorization: Bearer dev-edge-key-0001`.",
		},
		K8sNote: []string{
			"edge: the HTTP API for game servers and browsers (publish envelopes, outcomes over SSE and long",
			"poll, the /play console). Its NATS user `edge` may publish world events and read outcomes only.",
			"API keys (hashed) come from Secret worldgate-edge-keys (keys.json; docs/deploy.md). An SSE",
			"client resumes with Last-Event-ID on another replica, so it scales on CPU like the MCP servers;",
			"SIGTERM ends the SSE streams (clients resume elsewhere) and drains requests in flight.",
		},
		EnvPrefix: "WORLDGATE_", NATSUser: "edge", AdminPort: 9430, Listen: &Port{Name: "http", Number: 8080, Publish: true},
		File: &SecretFile{Env: "KEYS_FILE", Compose: "edge-keys", K8sSecret: "worldgate-edge-keys", Key: "keys.json",
			Volume: "api-keys", Dir: "/etc/worldgate/edge"},
		K8s: &K8s{},
	}
)

// processorTriggers are the lag of each partition's durable and of the legacy subject's.
func processorTriggers() []Trigger {
	var ts []Trigger
	for p := range natsx.DefaultPartitions {
		ts = append(ts, Trigger{Name: fmt.Sprintf("p%02d", p), Stream: "PROPOSALS",
			Consumer: runtime.PartitionDurable("event-processor", p), Lag: "100"})
	}
	return append(ts, Trigger{Name: "legacy", Stream: "PROPOSALS", Consumer: "event-processor", Lag: "100"})
}

// aiWorkerTriggers are the lag of each role's durable (a model's task: 20 a replica; the
// world rules call no model: 50) and of the rejections'.
func aiWorkerTriggers() []Trigger {
	var ts []Trigger
	for _, r := range roles.All() {
		lag := "20"
		if !r.UsesLLM {
			lag = "50"
		}
		ts = append(ts, Trigger{Stream: "WORLD", Consumer: r.Durable(), Lag: lag})
	}
	return append(ts, Trigger{Stream: "PROPOSALS", Consumer: aiworker.RejectionsDurable, Lag: "50"})
}
