// Package scripts holds the load, soak and chaos harnesses.
package scripts
