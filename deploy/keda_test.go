package deploy

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// scaledObject mirrors KEDA's keda.sh/v1alpha1 ScaledObject: every field of its spec as KEDA
// v2 defines it (github.com/kedacore/keda/v2/apis/keda/v1alpha1, ScaledObjectSpec and
// ScaleTriggers), so strict decoding refuses a field KEDA does not have. It is mirrored rather
// than imported because KEDA's API package pulls in client-go and some 800 packages, minutes of
// compiling on two cores for a dozen fields, and raises shared dependencies (Prometheus) past
// what the services use.
type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              scaledObjectSpec `json:"spec"`
}

type scaledObjectSpec struct {
	ScaleTargetRef        *scaleTarget    `json:"scaleTargetRef"`
	PollingInterval       *int32          `json:"pollingInterval,omitempty"`
	InitialCooldownPeriod *int32          `json:"initialCooldownPeriod,omitempty"`
	CooldownPeriod        *int32          `json:"cooldownPeriod,omitempty"`
	IdleReplicaCount      *int32          `json:"idleReplicaCount,omitempty"`
	MinReplicaCount       *int32          `json:"minReplicaCount,omitempty"`
	MaxReplicaCount       *int32          `json:"maxReplicaCount,omitempty"`
	Advanced              *scaledAdvanced `json:"advanced,omitempty"`
	Triggers              []scaleTrigger  `json:"triggers"`
	Fallback              *scaleFallback  `json:"fallback,omitempty"`
}

type scaleTarget struct {
	APIVersion             string `json:"apiVersion,omitempty"`
	Kind                   string `json:"kind,omitempty"`
	Name                   string `json:"name"`
	EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
}

type scaledAdvanced struct {
	HorizontalPodAutoscalerConfig *struct {
		Name     string                                         `json:"name,omitempty"`
		Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
	} `json:"horizontalPodAutoscalerConfig,omitempty"`
	RestoreToOriginalReplicaCount bool `json:"restoreToOriginalReplicaCount,omitempty"`
	ScalingModifiers              *struct {
		Formula          string `json:"formula,omitempty"`
		Target           string `json:"target,omitempty"`
		ActivationTarget string `json:"activationTarget,omitempty"`
		MetricType       string `json:"metricType,omitempty"`
	} `json:"scalingModifiers,omitempty"`
}

type scaleTrigger struct {
	Type              string            `json:"type"`
	Name              string            `json:"name,omitempty"`
	UseCachedMetrics  bool              `json:"useCachedMetrics,omitempty"`
	Metadata          map[string]string `json:"metadata"`
	AuthenticationRef *struct {
		Name string `json:"name"`
		Kind string `json:"kind,omitempty"`
	} `json:"authenticationRef,omitempty"`
	MetricType autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
}

type scaleFallback struct {
	FailureThreshold int32  `json:"failureThreshold"`
	Replicas         int32  `json:"replicas"`
	Behavior         string `json:"behavior,omitempty"`
}
