// Command pause holds a pod sandbox's namespaces open: it sleeps until SIGTERM or SIGINT
// and exits 0 then. As PID 1 of a shared PID namespace it also reaps orphaned children.
// Written for headroom's locally built pause image (scripts/images/build.sh).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig == syscall.SIGCHLD {
			for {
				var ws syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		os.Exit(0)
	}
}
