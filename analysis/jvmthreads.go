package analysis

import "strings"

// A JVM's run-queue waits are sampled for every thread, but HotSpot's own housekeeping threads
// hold no application thread when they wait: the JIT compilers, the reference and cleaner
// threads, the concurrent GC threads (they run beside the application; a stop-the-world pause is
// the GC log's and the safepoint log's, and its workers, GC Thread#N and the VM Thread, are not
// listed here), the periodic task and service threads. Their sched_delay rows stay in the tables
// but cover nothing, so an excursion is not named for a compiler thread's wait (threadBeside).
// Names are as the kernel keeps them (comm: the first 15 bytes).
var jvmHousekeeping = []string{
	"C1 CompilerThre", "C2 CompilerThre", "Sweeper thread",
	"Signal Dispatch", "Finalizer", "Reference Handl", "Common-Cleaner", "Service Thread",
	"Notification Th", "Monitor Deflati", "Attach Listener", "VM Periodic Tas",
	"G1 Service", "G1 Main Marker", "G1 Conc#", "G1 Refine#", "JFR ",
}

// threadBeside is the row detail of a housekeeping thread's wait.
const threadBeside = "a JVM housekeeping thread, holding no application thread: not covering"

// jvmHousekeepingThread says whether comm is one of HotSpot's housekeeping threads.
func jvmHousekeepingThread(comm string) bool {
	for _, p := range jvmHousekeeping {
		if strings.HasPrefix(comm, p) {
			return true
		}
	}
	return false
}
