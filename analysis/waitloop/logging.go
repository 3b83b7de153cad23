package waitloop

import (
	"go/types"
	"strings"
)

// logging reports whether fn logs: a method of a type named …Logger
// (Debug, Infof, Warn...), or a function of a logging package (zap,
// logrus, klog, zerolog).
func logging(fn *types.Func) bool {
	if sig := fn.Type().(*types.Signature); sig.Recv() != nil {
		t := sig.Recv().Type()
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if n, ok := types.Unalias(t).(*types.Named); ok && strings.HasSuffix(n.Obj().Name(), "Logger") {
			return true
		}
	}
	path := fn.Pkg().Path()
	return strings.Contains(path, "zap") || strings.Contains(path, "logrus") ||
		strings.Contains(path, "klog") || strings.Contains(path, "zerolog")
}
