package rundir

import (
	"os"
	"time"

	"github.com/rig-dev/rig/engine"
)

// The load generator's figures: loadgen/stats.json (ProbeStats) and loadgen/preload.json
// (PreloadStats), written by package loadgen, read by the runner and results.

// LateSendsFile, in LoadgenDir, is the probe sender's own lateness: one LateSend line per write
// that carried a probe more than 1 ms behind its schedule while a connection could take it
// (SendLag.LateConnected's) and whose hand-over came more than 1 ms after the sender was free to
// send it, flushed every second while the probe run goes on. A probe held for want of a leader
// is not in it: the outage is its cause, and the timeline's.
const LateSendsFile = "late-sends.ndjson"

// LateSend is one write of late probes: from when the sender was free to send them (FromNs: the
// earliest one's due time, or its previous write's return if later) until it handed them to the
// connection (WokeNs), the probes were late in the load generator itself — its sender's wake-up,
// run-queue wait or locks —, before any server could see them. A write that waits is a server
// not reading, not the sender's own: neither this write's time (to SentNs) nor the previous
// one's is in the span.
type LateSend struct {
	DueNs  int64 `json:"due_ns"`            // unix ns: the earliest late probe's due time
	FromNs int64 `json:"from_ns,omitempty"` // unix ns: the span's start (0 in older files: DueNs)
	WokeNs int64 `json:"woke_ns"`           // unix ns: handed to the connection
	SentNs int64 `json:"sent_ns"`           // unix ns
	Probes int   `json:"probes"`            // the write's probes more than 1 ms late
}

// From is when the sender was free to send the write's late probes: the span's start.
func (l LateSend) From() int64 { return max(l.FromNs, l.DueNs) }

// LateSendsWriter writes a late sends file.
type LateSendsWriter = lineWriter[LateSend]

// CreateLateSends creates (truncates) a late sends file.
func CreateLateSends(path string) (*LateSendsWriter, error) {
	return openLines[LateSend](path, os.O_TRUNC, "late sends file")
}

// LateSends reads the run's late sends (LoadgenDir/LateSendsFile). A line that does not decode
// is skipped.
func (f Folder) LateSends() ([]LateSend, error) {
	return readWith(f, LoadgenDir+"/"+LateSendsFile, "late sends file", readLines[LateSend])
}

// ProbeStats is what a probe run measured (stats.json). Every probe due before the schedule
// ended is either answered or lost: Scheduled = Answered + Lost once the run is done.
type ProbeStats struct {
	Start      time.Time    `json:"start"` // intended send time of probe 0
	End        time.Time    `json:"end"`   // when the schedule ended
	Rate       float64      `json:"rate"`
	DurationNs int64        `json:"duration_ns"` // as configured (0: until stopped)
	Phase      string       `json:"phase"`       // starting | running | draining | done
	StopReason string       `json:"stop_reason"` // duration | stop | signal | error
	Scheduled  int64        `json:"scheduled"`   // probes due before the schedule ended
	Sent       int64        `json:"sent"`        // first sends
	Answered   int64        `json:"answered"`    // OK or Rejected
	Rejected   int64        `json:"rejected"`    // answered, but the book refused the order
	Lost       int64        `json:"lost"`        // never answered within the grace period
	Unsent     int64        `json:"unsent"`      // lost probes the sender never got onto a connection
	Filled     int64        `json:"filled"`      // quantity the probes traded: must be 0
	Latency    Latency      `json:"latency"`     // answered probes, from intended send time
	SendLag    SendLag      `json:"send_lag"`
	Conn       ConnStats    `json:"conn"` // reconnects, leader changes with timestamps...
	Bursts     []BurstStats `json:"bursts,omitempty"`
	Error      string       `json:"error,omitempty"`
}

// Latency summarizes a latency histogram. Percentiles follow the rig's reporting rule: p99 only
// from n >= 100, p99.9 only from n >= 1000 (omitted otherwise).
type Latency struct {
	N      int64 `json:"n"`
	P50Ns  int64 `json:"p50_ns"`
	P90Ns  int64 `json:"p90_ns"`
	P99Ns  int64 `json:"p99_ns,omitempty"`
	P999Ns int64 `json:"p999_ns,omitempty"`
	MaxNs  int64 `json:"max_ns"`
}

// SendLag is how far behind schedule the sender put messages on the wire. A load generator
// that cannot keep its schedule is a measurement trap: large values mean the client, not only
// the server, shaped the figures (or the sender was blocked by a reconnect, which the latencies
// already carry).
type SendLag struct {
	MaxNs int64 `json:"max_ns"`
	P50Ns int64 `json:"p50_ns"`
	P99Ns int64 `json:"p99_ns,omitempty"`
	Late  int64 `json:"late"` // messages sent more than 1 ms after their intended time
	// Held: messages due while the sender held its schedule's messages because no connection
	// could take them (an outage, ConnStats.Holds), sent late by the outage itself. LateConnected:
	// late messages due outside every hold: the sender's own lateness, which must stay near 0.
	Held          int64 `json:"held"`
	LateConnected int64 `json:"late_connected"`
	// SenderSched ("fifo" or "other") and SenderNice are the scheduling policy and nice value the
	// sender's thread ran at (loadgen/precise.go: real-time when allowed, else a lower nice);
	// absent in older folders.
	SenderSched string `json:"sender_sched,omitempty"`
	SenderNice  *int   `json:"sender_nice,omitempty"`
}

// ConnStats counts what happened to a client's connections.
type ConnStats struct {
	Leader       string `json:"leader"` // the last server that answered a command
	Connects     int64  `json:"connects"`
	Reconnects   int64  `json:"reconnects"` // connections opened after a leader had answered
	DialFailures int64  `json:"dial_failures"`
	ConnLosses   int64  `json:"conn_losses"` // leader connections that died under the client
	Redirects    int64  `json:"redirects"`   // StatusNotLeader answers
	Errors       int64  `json:"errors"`      // StatusError answers (the command is resent)
	PingTimeouts int64  `json:"ping_timeouts"`
	// LeaderTimeouts: connections left because their commands waited LeaderTimeoutNs (the bound
	// in effect) with nothing heard (loadgen.ConnOptions.LeaderTimeout).
	LeaderTimeouts  int64          `json:"leader_timeouts"`
	LeaderTimeoutNs int64          `json:"leader_timeout_ns"`
	Resent          int64          `json:"resent"` // commands sent again after a redirect, an error or a lost connection
	Unknown         int64          `json:"unknown_answers,omitempty"`
	LeaderChanges   []LeaderChange `json:"leader_changes"`
	// Holds are the spans the sender held due messages for want of a connection (no leader
	// reachable, or a new server on probation), each until it had caught up with its schedule.
	Holds []Hold `json:"holds,omitempty"`
	// Timeline counts dials, failed dials, reconnects and resends per second (seconds with none
	// left out), so the analysis can window them by the runner's fault times: the load generator
	// runs apart from the runner and does not know them.
	Timeline []ConnSecond `json:"timeline,omitempty"`
}

// Hold is a span the sender could not send its due messages (see ConnStats.Holds).
type Hold struct {
	From     time.Time `json:"from"`     // the first message held was due
	To       time.Time `json:"to"`       // the sender had caught up with its schedule
	Messages int64     `json:"messages"` // first sends due in the span
	MaxLagNs int64     `json:"max_lag_ns"`
}

// ConnSecond is one second of ConnStats.Timeline.
type ConnSecond struct {
	At           time.Time `json:"at"` // start of the second
	Dials        int64     `json:"dials"`
	DialFailures int64     `json:"dial_failures"`
	Reconnects   int64     `json:"reconnects"`
	Resent       int64     `json:"resent"`
	// LateConnected are the messages due in this second that were sent late outside every hold
	// (SendLag.LateConnected, by the second they were due), so the analysis can tell the
	// sender's lateness around a fault from its lateness elsewhere.
	LateConnected int64 `json:"late_connected,omitempty"`
}

// LeaderChange is a change of the server that answers commands, as this client saw it.
type LeaderChange struct {
	At    time.Time `json:"at"` // first answer from the new leader
	From  string    `json:"from"`
	To    string    `json:"to"`
	GapNs int64     `json:"gap_ns"` // last answer from the old leader -> first answer from the new one
}

// BurstStats is what a burst series measured.
type BurstStats struct {
	Messages  int           `json:"messages"`
	EveryNs   int64         `json:"every_ns"`
	Count     int           `json:"count"`
	Phase     string        `json:"phase"`
	Sent      int64         `json:"sent"`
	Answered  int64         `json:"answered"`
	Lost      int64         `json:"lost"`
	Unsent    int64         `json:"unsent"`
	PeakPerMs int           `json:"peak_per_ms"` // most messages handed to the kernel in any 1 ms window
	Latency   Latency       `json:"latency"`     // from each burst's due time
	SendLag   SendLag       `json:"send_lag"`
	Conn      ConnStats     `json:"conn"`
	Bursts    []BurstResult `json:"bursts"`
	Error     string        `json:"error,omitempty"`

	// UDP series (docs/wire.md, "UDP ingress"): nothing is answered, so Answered, Latency and
	// DrainNs stay zero; the receiver's figures are in the engine's status.
	Transport  string           `json:"transport,omitempty"` // "udp"; empty: TCP
	Size       int              `json:"size,omitempty"`      // bytes per datagram
	Senders    int              `json:"senders,omitempty"`   // senders in this load generator
	Target     string           `json:"target,omitempty"`    // the leader's address the datagrams went to
	UDPSenders []UDPSenderStats `json:"udp_senders,omitempty"`
}

// UDPSenderStats is what one UDP sender did over a series.
type UDPSenderStats struct {
	Session     uint32 `json:"session"`
	Target      string `json:"target"`
	Sent        int64  `json:"sent"`
	NaksRecv    int64  `json:"naks_received"`
	Resent      int64  `json:"resent"`
	Unavailable int64  `json:"unavailable"` // NAKed datagrams already overwritten in the retransmit ring
	SendErrors  int64  `json:"send_errors"`
}

// BurstResult is one burst of a series.
type BurstResult struct {
	Index        int       `json:"index"`
	Burst        uint32    `json:"burst,omitempty"` // UDP: the burst number in the datagrams (the receiver's key)
	Due          time.Time `json:"due"`
	Sent         int       `json:"sent"`
	SendNs       int64     `json:"send_ns"`     // first message out -> last message out
	PeakPerMs    int       `json:"peak_per_ms"` // most messages out in any 1 ms window
	DrainNs      int64     `json:"drain_ns"`    // first message out -> last answer (time to drain)
	Answered     int       `json:"answered"`
	Lost         int       `json:"lost"`
	MaxLatencyNs int64     `json:"max_latency_ns"`

	// A burst through the engine's own client (transport "aeron"): reply latency percentiles from
	// each message's first offer (and the p99 from the burst's scheduled start), the most replies
	// in any 1 ms window, the offers refused for back pressure, and the sender's own transport
	// counters' deltas over the burst.
	P50LatencyNs      int64            `json:"p50_latency_ns,omitempty"`
	P99LatencyNs      int64            `json:"p99_latency_ns,omitempty"`
	P99FromStartNs    int64            `json:"p99_from_start_ns,omitempty"`
	AnsweredPeakPerMs int              `json:"answered_peak_per_ms,omitempty"`
	BackPressured     int64            `json:"back_pressured,omitempty"`
	ClientCounters    map[string]int64 `json:"client_counters,omitempty"`
}

// TransportSamples are every server's transport counters (GET engine.AdminTransport) sampled
// around the bursts of one series: one sample before each burst and one after the last, so
// burst k's deltas are samples k+1 minus k (a sample a server did not answer has a zero Time).
// Written beside the series' BurstStatsFile.
type TransportSamples struct {
	FirstBurst uint32                                `json:"first_burst"`
	Nodes      map[string][]engine.TransportCounters `json:"nodes"`
}

// PreloadStats is what a preload did.
type PreloadStats struct {
	Orders       int64     `json:"orders"` // acknowledged by the leader
	Batches      int64     `json:"batches"`
	ElapsedNs    int64     `json:"elapsed_ns"` // first send -> last answer
	OrdersPerSec float64   `json:"orders_per_sec"`
	Duplicates   int64     `json:"duplicate_batches"` // resent batches the book had already applied (answered Rejected)
	Filled       int64     `json:"filled"`            // quantity traded: must be 0
	Book         Book      `json:"book"`
	StateHash    string    `json:"state_hash,omitempty"` // the book's state hash, where the book was built in the controller (engine/driver.BookInstaller)
	Conn         ConnStats `json:"conn"`
}

// Book describes the book a preload builds (enough to check that a probe crosses nothing).
type Book struct {
	Instruments int    `json:"instruments"`
	Levels      int    `json:"levels"`
	Seed        uint64 `json:"seed"`
	BidLow      int64  `json:"bid_low"`
	BidHigh     int64  `json:"bid_high"` // best possible bid
	AskLow      int64  `json:"ask_low"`  // best possible ask
	AskHigh     int64  `json:"ask_high"`
	FirstID     uint64 `json:"first_id"`
	LastID      uint64 `json:"last_id"`
}
