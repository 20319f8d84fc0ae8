// Package engine holds the engine contract (docs/architecture.md, "Engine contract"): what the rig
// needs from any engine so a user's own engine can be plugged in. The reference engine
// (engine/replica, engine/server) speaks it; the agent's driver polls it.
package engine

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Phases an engine node goes through after launch, in order.
const (
	PhaseStarting   = "starting"    // process up, nothing loaded yet
	PhaseRestoring  = "restoring"   // loading its local snapshot
	PhaseJoining    = "joining"     // restored; no leader heard from yet, so nothing known committed
	PhaseReplaying  = "replaying"   // applying the log it already had on disk at launch
	PhaseCatchingUp = "catching-up" // applying entries it did not have at launch, up to the leader's commit
	PhaseReady      = "ready"       // caught up with a known leader (or is the leader)
)

// Phases are the phases in contract order: a node's phase never goes back in this list.
var Phases = []string{PhaseStarting, PhaseRestoring, PhaseJoining, PhaseReplaying, PhaseCatchingUp, PhaseReady}

// Roles as raft names them, lower-cased.
const (
	RoleLeader    = "leader"
	RoleFollower  = "follower"
	RoleCandidate = "candidate"
	RoleShutdown  = "shutdown"
)

// Status is GET /status on the engine's admin address.
type Status struct {
	Node         string    `json:"node"`
	Role         string    `json:"role"`
	Phase        string    `json:"phase"`
	Leader       string    `json:"leader,omitempty"` // leader's node id, when known
	Term         uint64    `json:"term"`
	CommitIndex  uint64    `json:"commit_index"`  // highest index known committed
	AppliedIndex uint64    `json:"applied_index"` // the FSM's own: last entry applied to the book
	LastLogIndex uint64    `json:"last_log_index"`
	LaunchLog    uint64    `json:"launch_log_index"` // last index on disk at launch (replay target)
	LastSnapshot *Snapshot `json:"last_snapshot,omitempty"`
	Orders       int       `json:"orders"`
	StateHash    string    `json:"state_hash"`
	PID          int       `json:"pid"`
	Started      time.Time `json:"started"`
	Now          time.Time `json:"now"`
	Config       Reported  `json:"config"` // the settings in EFFECT, so the rig can verify every one arrived
	UDP          *UDP      `json:"udp,omitempty"`
	// StateHashIndex is the log index StateHash belongs to when the engine cannot hash its live
	// state and hashes the last snapshot it took instead (every node takes it at one index); 0
	// when the hash is of the applied state.
	StateHashIndex uint64 `json:"state_hash_index,omitempty"`
	// ElectionState is the engine's own state inside its election protocol, when it has finer
	// states than Role (Aeron Cluster's ElectionState name: CANVASS, NOMINATE, ..., CLOSED when
	// no election is open); the hand-off timeline draws each as a span. Empty when it has none.
	ElectionState string `json:"election_state,omitempty"`
	// IgnoredProperties are configuration properties the engine was given but reads nowhere
	// (Aeron: aeron.* system properties no configuration class of the running Aeron declares):
	// a misspelt or retired name that would do nothing. The runner refuses the run before load,
	// naming each and where it came from.
	IgnoredProperties []string `json:"ignored_properties,omitempty"`
	// Unsupported names the parts of the contract the engine does not provide (Unsupported*):
	// rig check and the report say so instead of reading a zero as a value.
	Unsupported []string `json:"unsupported,omitempty"`
	// StepDown is how the engine hands its leadership over: "" by POST AdminStepDown while it
	// runs, StepDownRelaunch by its graceful stop.
	StepDown string `json:"step_down,omitempty"`
	// Traps are ways the user's code misfits an engine harness, counted where they happen;
	// absent while none has.
	Traps *Traps `json:"traps,omitempty"`
}

// Traps are what an engine harness saw of code that does not fit it (the Aeron harness: the
// user's codec and service), since the process started. The runner stops a run at the first
// unmatched reply, naming the codec, and counts service errors in the report.
type Traps struct {
	Codec string `json:"codec,omitempty"` // the codec's class
	// UnmatchedReplies are answers the codec read a correlation id from that the gateway never
	// sent: the requests they answer wait until they time out, and look like a lost leader.
	UnmatchedReplies uint64 `json:"unmatched_replies,omitempty"`
	FirstUnmatchedID int64  `json:"first_unmatched_id,omitempty"`
	// ServiceErrors are messages the service threw on (every node counts its own); each request
	// was answered rejected with FirstServiceError's kind of text, not left to time out.
	ServiceErrors     uint64 `json:"service_errors,omitempty"`
	FirstServiceError string `json:"first_service_error,omitempty"` // "the service threw <class>: <message>"
}

// Kinds names the traps that happened, for a transition when a new one first does.
func (t *Traps) Kinds() string {
	if t == nil {
		return ""
	}
	var k []string
	if t.UnmatchedReplies > 0 {
		k = append(k, "unmatched_replies")
	}
	if t.ServiceErrors > 0 {
		k = append(k, "service_errors")
	}
	return strings.Join(k, ",")
}

// UnmatchedError names an unmatched reply, for the run's error.
func (t *Traps) UnmatchedError() string {
	return fmt.Sprintf("%d answer(s) the codec %s read a correlation id from that the gateway never sent (first: %d): its decodeEgress must return the id its encoder wrote, or the requests look unanswered (\"no leader\")",
		t.UnmatchedReplies, t.Codec, t.FirstUnmatchedID)
}

// StepDownRelaunch (Status.StepDown) is an engine that cannot hand leadership over while it
// runs but whose graceful stop on SIGTERM does (Aeron Cluster: the leader's log publication
// sends end-of-stream and the followers elect at once), so a step-down is a SIGTERM, the exit
// within StepDownStopBound, and a relaunch at once: the node rejoins as a follower.
const StepDownRelaunch = "relaunch"

// StepDownStopBound is how long a step-down by relaunch waits for the engine's graceful stop;
// an engine still running then cannot be stopped gracefully, and is killed.
const StepDownStopBound = 10 * time.Second

// Names in Status.Unsupported.
const (
	UnsupportedStateHash  = "state_hash"  // no hash of the live state: StateHash is the last snapshot's, at StateHashIndex
	UnsupportedOrders     = "orders"      // Orders is not counted
	UnsupportedHeldOrders = "held_orders" // no GET /orders: lost orders are not checked
	UnsupportedStepDown   = "step_down"   // POST /step-down is refused
	UnsupportedCancel     = "cancel"      // cancel requests are rejected
)

// StateHashPosition is the log position StateHash is of: StateHashIndex when the engine hashes its
// last snapshot, AppliedIndex when it hashes its live state. Two hashes say something about
// agreement only at one position.
func (s Status) StateHashPosition() uint64 {
	if s.StateHashIndex > 0 {
		return s.StateHashIndex
	}
	return s.AppliedIndex
}

// StateHashOfSnapshot says whether StateHash hashes the bytes of the last snapshot rather than the
// live state: bytes may differ where the state agrees (a service that writes a clock reading or a
// hash-ordered map into its snapshot).
func (s Status) StateHashOfSnapshot() bool {
	return s.StateHashIndex > 0 || !s.Supports(UnsupportedStateHash)
}

// NotSupported is printed in place of a figure the engine says it does not provide: never a zero.
const NotSupported = "n/a (not supported by the engine)"

// SnapshotHashNote is what rig check and the report add where hashes of snapshot bytes differ.
const SnapshotHashNote = "these are hashes of the bytes each node wrote into its snapshot, which may differ where the state agrees " +
	"(a service that writes System.nanoTime() or a map in hash order into its snapshot); " +
	"give a hash of the state to compare it instead (Introspection.stateHash(), or state_hash without state_hash_index: " +
	"docs/engines.md, \"Your own Aeron Cluster service\")"

// Supports says whether the engine provides the named part of the contract (Unsupported*).
func (s Status) Supports(part string) bool {
	for _, u := range s.Unsupported {
		if u == part {
			return false
		}
	}
	return true
}

// UDP is the UDP ingress's state in /status: the receive buffer asked for and what the kernel
// granted (read back with getsockopt; Linux doubles the request and clamps it to
// 2 x net.core.rmem_max), and counters since launch. Bursts are listed with /status?udp=1.
type UDP struct {
	Addr          string  `json:"addr"`
	RcvbufAsked   int     `json:"rcvbuf_asked"`   // 0: the kernel default was kept
	RcvbufGranted int     `json:"rcvbuf_granted"` // getsockopt(SO_RCVBUF)
	RmemMax       int     `json:"rmem_max"`       // net.core.rmem_max when the socket was opened
	NakDelayMs    float64 `json:"nak_delay_ms"`
	RecvNice      int     `json:"recv_nice"`                 // nice value of the receive thread
	RecvNiceError string  `json:"recv_nice_error,omitempty"` // why udp_recv_nice could not be set
	Received      uint64  `json:"received"`                  // DATA datagrams, including duplicates
	Delivered     uint64  `json:"delivered"`                 // in order, once each
	Duplicates    uint64  `json:"duplicates"`                // already delivered or already waiting
	Malformed     uint64  `json:"malformed"`                 // bad header or body
	NotLeader     uint64  `json:"not_leader"`                // delivered while not the leader: not applied
	Applied       uint64  `json:"applied"`                   // committed and applied through the log
	ApplyErrors   uint64  `json:"apply_errors"`              // raft refused or timed out
	Gaps          uint64  `json:"gaps"`
	Naks          uint64  `json:"naks"`
	Repaired      uint64  `json:"repaired"`
	Lost          uint64  `json:"lost"` // given up on: the sender no longer had them
	OpenGaps      int     `json:"open_gaps"`
	SocketDrops   uint64  `json:"socket_drops"` // SO_RXQ_OVFL: datagrams this socket's full buffer dropped
	RepairMaxMs   float64 `json:"repair_max_ms"`

	Bursts []UDPBurst `json:"bursts,omitempty"`
}

// UDPBurst is what the receiver saw of one burst number (every sender's datagrams with it).
type UDPBurst struct {
	Burst        uint32    `json:"burst"`
	Sessions     int       `json:"sessions"`
	Received     uint64    `json:"received"` // unique datagrams
	First        time.Time `json:"first"`    // first datagram received
	Last         time.Time `json:"last"`     // last datagram received (repairs included)
	AbsorbMs     float64   `json:"absorb_ms"`
	PeakPerMs    int       `json:"peak_per_ms"` // most datagrams received in any 1 ms window
	LatencyP50Us float64   `json:"latency_p50_us"`
	LatencyP99Us float64   `json:"latency_p99_us"`
	LatencyMaxUs float64   `json:"latency_max_us"` // delivery (in order) minus the sender's stamp
	Gaps         uint64    `json:"gaps"`
	Naks         uint64    `json:"naks"`
	Repaired     uint64    `json:"repaired"`
	Lost         uint64    `json:"lost"`
	RepairMaxMs  float64   `json:"repair_max_ms"` // gap detected -> last missing datagram arrived
	SocketDrops  uint64    `json:"socket_drops"`  // SO_RXQ_OVFL growth over the burst
	RcvbufErrors uint64    `json:"rcvbuf_errors"` // /proc/net/snmp Udp RcvbufErrors growth (the whole node)
	Closed       bool      `json:"closed"`        // quiet and no gap open: figures are final
}

// Snapshot describes the last snapshot a node took or restored.
type Snapshot struct {
	Index       uint64  `json:"index"`
	Term        uint64  `json:"term"`
	TakeMs      float64 `json:"take_ms"`      // time the book stood still for it: everything below
	EncodeMs    float64 `json:"encode_ms"`    // encoding and writing blocks, with a sync per block at level > 0
	PersistedMs float64 `json:"persisted_ms"` // until durable: encode + final file sync, rename, directory sync
	Bytes       int64   `json:"bytes"`
	// Orders and Syncs are absent when the engine does not count them (never a zero for "not
	// counted"): resting orders in the snapshot, and the syncs its take made.
	Orders    *int64  `json:"orders,omitempty"`
	Syncs     *int    `json:"syncs,omitempty"`
	Restored  bool    `json:"restored,omitempty"` // loaded at launch rather than taken
	RestoreMs float64 `json:"restore_ms,omitempty"`
	// EngineWrites is what the engine's own storage layer counted over the snapshot, for an engine
	// that counts its writes itself (the Aeron engine reads its Archive's recorder counters);
	// absent otherwise. The report shows it beside the disk model's forces.
	EngineWrites *EngineWrites `json:"engine_writes,omitempty"`
}

// EngineWrites is an engine's own count of its storage writes over a window: from a snapshot's
// take to its persist, every file the engine wrote (its log's too).
type EngineWrites struct {
	Source string  `json:"source"`  // what counted them, e.g. the Archive's recorder counters
	Bytes  int64   `json:"bytes"`   // bytes written in the window
	TimeMs float64 `json:"time_ms"` // time in the writes, with their syncs where the engine times them together
	MaxMs  float64 `json:"max_ms"`  // the longest single write the engine has seen since it started (a running maximum)
}

// Reported is /status config: every setting in effect by the name the engine's driver table
// gives it (engine/driver), each a JSON string, number or boolean. A duration is Go text
// ("200ms") or a bare integer in the unit the table renders it in (nanoseconds by default); the
// rig compares each with what it asked for by the setting's kind. An engine may report more
// (its addresses, its own defaults): only asked settings are checked.
type Reported map[string]any

// Reported is c as /status reports it: every field of the config file by its JSON name.
func (c Config) Reported() Reported {
	b, _ := json.Marshal(c)
	var out Reported
	_ = json.Unmarshal(b, &out)
	return out
}

// Config is the reference engine node's configuration file (JSON); the agent writes it for
// every engine, and the command driver's templates see its addresses.
type Config struct {
	Node       string `json:"node"`        // e.g. node-0
	Dir        string `json:"dir"`         // data folder: raft log, snapshots
	RaftAddr   string `json:"raft_addr"`   // host:port for raft transport
	ClientAddr string `json:"client_addr"` // host:port for the client protocol
	AdminAddr  string `json:"admin_addr"`  // 127.0.0.1:port for the admin API
	Peers      []Peer `json:"peers"`       // every voter, this node included
	Bootstrap  bool   `json:"bootstrap"`   // form the cluster on first start (set on every node; idempotent)

	SyncLevel        int    `json:"sync_level"`         // 0 none, 1 fdatasync, 2 fsync (log, snapshots, metadata)
	SnapshotBlock    int    `json:"snapshot_block"`     // bytes per snapshot block; a sync after each at level > 0
	EncodeThreads    int    `json:"encode_threads"`     // snapshot encode goroutines
	HeartbeatTimeout string `json:"heartbeat_timeout"`  // Go duration
	ElectionTimeout  string `json:"election_timeout"`   // Go duration
	MaxAppendEntries int    `json:"max_append_entries"` // raft batching

	// UDP ingress (engine/server/udp.go) listens on ClientAddr's host and port, over UDP.
	UDPRcvbuf   int    `json:"udp_rcvbuf,omitempty"`    // SO_RCVBUF asked for, bytes; 0 = the kernel's default
	UDPNakDelay string `json:"udp_nak_delay,omitempty"` // Go duration from detecting a gap to the first NAK
	// UDPRecvNice, when not 0, is the nice value (-20..19) of the thread that drains the UDP
	// socket, as a dedicated receiver thread is given priority in production; lowering it needs
	// root (CAP_SYS_NICE). What was set is in /status (udp.recv_nice).
	UDPRecvNice int `json:"udp_recv_nice,omitempty"`

	// FlightRecorder keeps a runtime/trace flight recorder, served at GET AdminTrace
	// (docs/engines.md, "What an engine provides", item 8). Reported even when false, so asking for false is checked.
	FlightRecorder bool `json:"flight_recorder"`
	// FlightRecorderWindow is how far back the recorder's dump reaches (its MinAge; a Go
	// duration), bounded by its memory (FlightRecorderBytes); empty: the engine's
	// default, engine/server.FlightRecorderWindow.
	FlightRecorderWindow string `json:"flight_recorder_window,omitempty"`
	// FlightRecorderIdle keeps the flight recorder stopped until POST AdminTraceStart: the agent
	// runs it only around a run's windows (engine.recording: windows), so it costs nothing
	// between them.
	FlightRecorderIdle bool `json:"flight_recorder_idle,omitempty"`
	// CauseSourcesOff: a playbook's cause_sources: off, to price the always-on sources: the
	// engine writes no pause record (the node folder's pauses file: the Go runtime's GC pauses,
	// the Aeron harness's duty-cycle stalls) and runs no sampler for it.
	CauseSourcesOff bool `json:"cause_sources_off,omitempty"`
}

// FlightRecorderBytes is the most memory the reference engine's flight recorder holds (its
// MaxBytes), and so the most one dump of it holds: the runner's memory and free-space checks
// count it per engine and per take (runner/recording.go).
const FlightRecorderBytes = 128 << 20

// UDPRecvNiceSetting is the setting whose effect the UDP section's recv_nice shows (the nice value
// the receive thread really runs at, beside the config's asked one).
const UDPRecvNiceSetting = "udp_recv_nice"

// Peer is one voter.
type Peer struct {
	Node       string `json:"node"`
	RaftAddr   string `json:"raft_addr"`
	ClientAddr string `json:"client_addr"`
}

// The admin API answers only the agent that started the engine. The agent makes a secret for
// its lifetime and hands it to every engine it starts in the environment variable
// Admin API paths (docs/engines.md): GET AdminStatus, AdminChanges and AdminMetrics, POST
// AdminSnapshot and AdminStepDown. The agent's proxy forwards all but AdminChanges, which its
// supervisor polls itself.
const (
	AdminStatus   = "/status"
	AdminChanges  = "/changes"
	AdminMetrics  = "/metrics"
	AdminSnapshot = "/snapshot"
	AdminStepDown = "/step-down"
	// AdminOrders (GET) lists the order ids the engine applied (HeldOrders), for the durability
	// check against the load generator's ledger of acknowledged orders. Optional: an engine
	// that answers 404 is reported as not checked.
	AdminOrders = "/orders"
	// AdminTrace (GET) answers the engine's runtime/trace flight recorder window (a Go
	// execution trace, read with golang.org/x/exp/trace; recording/gotrace.go). Optional: an
	// engine without a recorder answers 404.
	AdminTrace = "/trace"
	// AdminTraceStart and AdminTraceStop (POST) start and stop that recorder (a stopped one
	// drops its window): a recording cut to a run's windows. Optional, as AdminTrace.
	AdminTraceStart = "/trace/start"
	AdminTraceStop  = "/trace/stop"
	// AdminGC (POST) has the engine collect its garbage now (a JVM's System.gc(), Go's
	// runtime.GC()) and answer GCAnswer: the gc action provokes a GC pause on purpose, so the
	// analysis can be seen to name it. Optional: an engine offers it through its driver
	// (driver.AdminOfferer) or its playbook (engine.admin_gc).
	AdminGC = "/gc"
	// AdminTransport (GET) answers TransportCounters: the engine's transport counters now (an
	// Aeron node's media driver counters, read as AeronStat reads them), sampled around each
	// burst so the report has their deltas per burst. Optional: an engine without answers 404.
	AdminTransport = "/transport"
)

// TransportCounters answers GET AdminTransport. Counters are cumulative since the engine
// started, by name (Aeron's system counters in snake case: nak_messages_sent, retransmits_sent,
// loss_gap_fills, flow_control_under_runs, short_sends, errors ...).
type TransportCounters struct {
	Time     time.Time        `json:"time"`
	Counters map[string]int64 `json:"counters"`
	// The node's /proc/net/snmp Udp counters.
	UDPRcvbufErrors int64 `json:"udp_rcvbuf_errors"`
	UDPInErrors     int64 `json:"udp_in_errors"`
	// Settings are the transport settings in effect, by name (e.g. aeron.rcv.initial.window.length,
	// so_rcvbuf_granted: what the kernel grants a socket that asks for aeron.socket.so_rcvbuf).
	Settings map[string]int64 `json:"settings,omitempty"`
	// BurstReceive is what the node's burst probe received of each recent burst, where it has one
	// (an Aeron node started with -Drig.burst.probe=true: a plain subscription on its own ingress,
	// beside the consensus module's).
	BurstReceive []BurstReceive `json:"burst_receive,omitempty"`
}

// BurstReceive is one burst's receive path on a node, before consensus: the messages that
// arrived, when the first and last did (Unix ns on the node's clock), the most in any 1 ms, and
// latency from each message's first offer (the micro-burst guide's figure) and from the burst's
// scheduled start (which counts the sender's queue ahead of each message too), in ns.
type BurstReceive struct {
	Burst          uint32 `json:"burst"`
	Received       int    `json:"received"`
	FirstUnixNs    int64  `json:"first_unix_ns"`
	LastUnixNs     int64  `json:"last_unix_ns"`
	PeakPerMs      int    `json:"peak_per_ms"`
	P50Ns          int64  `json:"p50_ns"`
	P99Ns          int64  `json:"p99_ns"`
	MaxNs          int64  `json:"max_ns"`
	FromStartP50Ns int64  `json:"from_start_p50_ns"`
	FromStartP99Ns int64  `json:"from_start_p99_ns"`
	FromStartMaxNs int64  `json:"from_start_max_ns"`
}

// GCAnswer answers POST AdminGC.
type GCAnswer struct {
	WallMs      float64 `json:"wall_ms"`     // the collection call, start to return
	Collections int     `json:"collections"` // collections it ran (JVM: the GC beans' count; Go: cycles)
	// PauseMs is the stop-the-world time of those collections (JVM: the GC beans' collection
	// time, all of it for a full collection; Go: MemStats.PauseTotalNs).
	PauseMs float64 `json:"pause_ms"`
}

// HeldOrders answers GET AdminOrders: the ids of the single orders (not preload batches) this
// node applied, as closed ranges [lo, hi] in ascending order. Orders applied at or below
// KnownFromIndex came with a snapshot the node restored and are not listed: an acknowledged order
// acknowledged at or below it cannot be told held or lost from this answer. Check says what the
// ids are: the orders the state holds (CheckHeldOrders, the default when empty) or the
// correlation ids of the ingress messages the node applied (CheckAppliedIngress: an engine that
// cannot list its state's orders but sends each order with its id as the correlation id).
type HeldOrders struct {
	Ranges         [][2]uint64 `json:"ranges"`
	KnownFromIndex uint64      `json:"known_from_index"`
	AppliedIndex   uint64      `json:"applied_index"`
	Check          string      `json:"check,omitempty"`
}

// HeldOrders.Check values.
const (
	CheckHeldOrders     = "held orders"
	CheckAppliedIngress = "applied ingress"
)

// CheckOrDefault is h.Check, CheckHeldOrders when the engine did not say.
func (h HeldOrders) CheckOrDefault() string {
	if h.Check == "" {
		return CheckHeldOrders
	}
	return h.Check
}

// Holds reports whether id is in one of h's ranges.
func (h HeldOrders) Holds(id uint64) bool {
	lo, hi := 0, len(h.Ranges)
	for lo < hi {
		m := (lo + hi) / 2
		switch r := h.Ranges[m]; {
		case id < r[0]:
			hi = m
		case id > r[1]:
			lo = m + 1
		default:
			return true
		}
	}
	return false
}

// AdminTokenEnv (never in argv, which any user can read in /proc, and never in the config
// file, which is collected into results). The engine requires it on every admin request as
// `Authorization: Bearer <token>` and answers 401 without it. A user's engine (a JVM, say)
// takes part by reading the variable once at start-up, comparing the header in constant time,
// and not passing the variable on to processes of its own. docs/security.md has the threat model.
const AdminTokenEnv = "RIG_ADMIN_TOKEN"

// ClusterSecretEnv carries a secret every engine of one run shares (the admin token is one per
// agent, so nodes cannot check each other's): an engine whose nodes talk to each other through
// endpoints on the network address (the Aeron harness's archive control channel and cluster
// ingress) accepts only clients that prove they hold it. The target makes it once per run and
// puts it in the environment of the run's agents, which pass their environment on to the
// engines they start; like AdminTokenEnv it is never in argv, a config file or results.
const ClusterSecretEnv = "RIG_CLUSTER_SECRET"

// NewClusterSecret makes a run's engine secret (ClusterSecretEnv): 32 random bytes, hex.
func NewClusterSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make the run's engine secret: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// AuthorizeAdmin sets the agent's bearer token on an admin request.
func AuthorizeAdmin(req *http.Request, token string) {
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
}

// RequireAdminToken wraps an admin handler so that only requests with the bearer token pass; the
// rest get 401. An empty token refuses every request: an engine started without one has no
// caller it can trust.
func RequireAdminToken(token string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if token == "" || !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="rig engine admin"`)
			http.Error(w, `{"error":"admin API: missing or wrong bearer token (`+AdminTokenEnv+`, engine/contract.go)"}`, http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Changes is GET /changes?since=V&wait=D on the admin address: the engine's status at every
// change of its phase, role, term, leader or last snapshot after version V, oldest first. It
// answers at once when there are such changes, else as soon as one happens, or after wait with
// none. The agent follows an engine this way instead of polling GET /status; an engine without
// it answers 404 and is polled.
type Changes struct {
	Version   uint64   `json:"version"` // of the newest change: the next request's since
	Changes   []Change `json:"changes"`
	Truncated bool     `json:"truncated,omitempty"` // changes right after since were dropped (too many to keep)
}

// Change is the status at one change, as the engine saw it: the change happened in
// (PrevCheck, Status.Now], both on the engine's clock. PrevCheck is zero for the first state a
// process reports.
type Change struct {
	Version   uint64    `json:"version"`
	PrevCheck time.Time `json:"prev_check,omitzero"`
	Status    Status    `json:"status"`
}

// MaxChangesWait caps the wait of a GET /changes long poll.
const MaxChangesWait = time.Minute
