// Package deploy holds the checks of the deployment artifacts (Dockerfiles, compose, Kubernetes).
package deploy
