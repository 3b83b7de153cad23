// Package cpu is placeholder.
package cpu
