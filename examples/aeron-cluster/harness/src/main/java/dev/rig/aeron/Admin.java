package dev.rig.aeron;

import com.sun.management.HotSpotDiagnosticMXBean;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.aeron.archive.Archive;
import io.aeron.archive.client.AeronArchive;
import io.aeron.cluster.ClusterControl;
import io.aeron.cluster.ClusteredMediaDriver;
import io.aeron.cluster.ConsensusModule;
import io.aeron.cluster.ElectionState;
import io.aeron.cluster.client.AeronCluster;
import io.aeron.cluster.service.ClusterCounters;
import io.aeron.cluster.service.ClusteredServiceContainer;
import io.aeron.driver.MediaDriver;
import io.aeron.AeronCounters;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.agrona.concurrent.status.AtomicCounter;
import org.agrona.concurrent.status.CountersReader;

/**
 * The engine contract's admin API (engine/contract.go, docs/engines.md) on the admin address:
 * GET /status, GET /changes, POST /snapshot, POST /step-down (409: /status step_down says relaunch),
 * POST /stop (the graceful stop SIGTERM starts), GET /metrics (and GET /orders), each only with
 * Authorization: Bearer $RIG_ADMIN_TOKEN.
 *
 * /status reads the node's Aeron counters (the ones ClusterTool prints): role (type 201),
 * commit position (203), election state (207), leadership term id (239), the log recording's
 * position (archive type 100, log stream); applied position and the snapshot from the service.
 * Positions are log byte positions: comparable across nodes and increasing, as the contract
 * needs. config is read back from the running contexts.
 */
final class Admin
{
    /** The Aeron on the class path at run time (read reflectively: the constant would be inlined at compile time). */
    static final String AERON_VERSION = runtimeVersion();
    private static final String[] PHASES = {"starting", "restoring", "joining", "replaying", "catching-up", "ready"};

    private final Node.Config cfg;
    private final NodeState state;
    private final Runnable stop;
    private final Introspection introspection;
    private final boolean liveHash;
    private final boolean ordersSupported;
    private final byte[] token;
    private final Instant started = Instant.now();
    private HttpServer http;
    private volatile ClusteredMediaDriver driver;
    private volatile ClusteredServiceContainer container;
    private volatile ElectionReasons reasons;
    private volatile Gateway gateway;
    private int phase; // index in PHASES, only ever raised
    /** When the phase was last raised (epoch ns), for its span (PhaseLog). */
    private long phaseSinceNs;
    /** The span kind of each phase between restore and ready (rundir's join, replay, catch_up). */
    private static final String[] PHASE_KINDS = {null, null, "join", "replay", "catch_up", null};
    private volatile long launchLog;
    /** GET /changes, fed by the watcher thread (watch). */
    private final Changes changes = new Changes();
    private volatile boolean watching;
    private Thread watcher;
    /** Counter ids by type, found once (ClusterCounters.find scans every counter); -1 until found. */
    private final java.util.Map<Integer, Integer> counterIds = new java.util.concurrent.ConcurrentHashMap<>();

    /** stop starts the node's graceful stop (GracefulStop), as SIGTERM does: POST /stop. */
    Admin(final Node.Config cfg, final NodeState state, final String token, final Introspection introspection, final Runnable stop)
    {
        this.cfg = cfg;
        this.state = state;
        this.stop = stop;
        this.introspection = introspection;
        this.liveHash = overrides(introspection, "stateHash");
        this.ordersSupported = overrides(introspection, "restingOrders");
        this.token = token == null ? new byte[0] : token.getBytes(StandardCharsets.UTF_8);
    }

    /** Binds before the cluster launches, so the agent sees "starting" as soon as the JVM is up. */
    void bind(final InetSocketAddress addr) throws IOException
    {
        http = HttpServer.create(addr, 64);
        // A long poll of GET /changes and a POST /snapshot may each hold a thread for a while.
        http.setExecutor(Executors.newFixedThreadPool(8, r ->
        {
            final Thread t = new Thread(r, "admin-http");
            t.setDaemon(true);
            return t;
        }));
        http.createContext("/", this::handle);
        http.createContext(GcHandler.PATH, new GcHandler(token));
        http.createContext(TransportCounters.PATH, new TransportCounters(token, () ->
        {
            final ClusteredServiceContainer c = container;
            return c == null ? null : c.context().aeron().countersReader();
        }, () ->
        {
            final ClusteredMediaDriver d = driver;
            return d == null ? null : d.mediaDriver().context();
        }));
        http.start();
        watching = true;
        watcher = new Thread(this::watch, "admin-changes");
        watcher.setDaemon(true);
        state.watcher = watcher;
        watcher.start();
    }

    /** The launched node: its contexts are concluded, and config reads them from now on. */
    void start(final ClusteredMediaDriver driver, final ClusteredServiceContainer container)
    {
        this.driver = driver;
        this.container = container;
        this.reasons = new ElectionReasons(driver.consensusModule().context());
    }

    void gateway(final Gateway g)
    {
        this.gateway = g;
    }

    /** The port the admin API listens on (an ephemeral one when bound to port 0). */
    int port()
    {
        return http.getAddress().getPort();
    }

    void close()
    {
        watching = false;
        LockSupport.unpark(watcher);
        changes.close();
        http.stop(0);
    }

    /**
     * Checks the node when woken — by the consensus module's counters moving (ChangeSignal) or the
     * service reporting a role, leadership term, restore or snapshot (NodeState.changed) — and
     * otherwise at WatchPace's interval: every millisecond while an election is open or just after a
     * change, every 50 ms when the node is settled. Feeds GET /changes. A check reads a few
     * counters; the status is rendered only when something changed.
     */
    private void watch()
    {
        final RepeatedError errors = new RepeatedError("admin: change check");
        final WatchPace pace = new WatchPace();
        ElectionState was = null;
        while (watching)
        {
            long sleepNs = WatchPace.FAST_NS;
            try
            {
                final Instant now = Instant.now();
                final Reading r = read();
                final int ph = advance(r);
                final boolean changed = changes.check(changeKey(r, ph), now, () -> render(r, ph, "", 0, now));
                final ElectionReasons er = reasons;
                if (er != null && was == ElectionState.CLOSED && r.election() != ElectionState.CLOSED)
                {
                    er.report(); // the consensus module recorded why before its election state left CLOSED
                }
                was = r.election();
                sleepNs = pace.next(System.nanoTime(), r.serviceStarted() && r.election() == ElectionState.CLOSED, changed);
                errors.ok();
            }
            catch (final RuntimeException e)
            {
                errors.failed(e);
            }
            LockSupport.parkNanos(sleepNs);
        }
        errors.ok();
    }

    /** What a change is a change of: the contract's phase, role, leader, term and last snapshot, and Aeron's election state. */
    private List<Object> changeKey(final Reading r, final int ph)
    {
        final NodeState.Snapshot s = r.snapshot();
        return List.of(ph, role(r), leaderNode(r), r.term(), r.election() == null ? "none" : r.election().name(),
            s == null ? -1L : s.index(), s != null && s.restored(), state.traps.kinds());
    }

    /** The cluster control toggle's actions in the Aeron that runs (its states but INACTIVE and NEUTRAL). */
    private static String toggleActions()
    {
        final List<String> out = new ArrayList<>();
        for (final ClusterControl.ToggleState t : ClusterControl.ToggleState.values())
        {
            if (!t.name().equals("INACTIVE") && !t.name().equals("NEUTRAL"))
            {
                out.add(t.name());
            }
        }
        return String.join(", ", out);
    }

    /** Whether the user's introspection implements a method (else the interface's default: not supported). */
    static boolean overrides(final Introspection i, final String method)
    {
        try
        {
            return i.getClass().getMethod(method).getDeclaringClass() != Introspection.class;
        }
        catch (final NoSuchMethodException e)
        {
            return false;
        }
    }

    private static String runtimeVersion()
    {
        try
        {
            return (String)io.aeron.AeronVersion.class.getField("VERSION").get(null);
        }
        catch (final ReflectiveOperationException e)
        {
            return "unknown";
        }
    }

    /** The contract's parts this node does not provide (GET /status unsupported; rig check and the report name them). */
    private List<String> unsupported()
    {
        final List<String> out = new ArrayList<>();
        if (!liveHash)
        {
            out.add("state_hash");
        }
        if (!ordersSupported)
        {
            out.add("orders");
        }
        final Gateway g = gateway;
        if (g != null)
        {
            out.addAll(g.unsupported());
        }
        return out;
    }

    private void handle(final HttpExchange ex) throws IOException
    {
        try
        {
            if (!authorized(ex, token))
            {
                return;
            }
            final String path = ex.getRequestURI().getPath();
            final String method = ex.getRequestMethod();
            final String query = ex.getRequestURI().getQuery() == null ? "" : ex.getRequestURI().getQuery();
            if (path.equals("/status") && method.equals("GET"))
            {
                reply(ex, 200, status(query.contains("hash=1")));
            }
            else if (path.equals("/changes") && method.equals("GET"))
            {
                changes(ex, query);
            }
            else if (path.equals("/snapshot") && method.equals("POST"))
            {
                snapshot(ex);
            }
            else if (path.equals("/step-down") && method.equals("POST"))
            {
                reply(ex, 409, "{\"error\":" + Json.str("Aeron " + AERON_VERSION + " has no leader hand-off while the leader runs " +
                    "(ClusterControl toggles: " + toggleActions() + "); its graceful stop hands over (the followers see end-of-stream " +
                    "and elect at once): /status step_down is relaunch, so stop this node (SIGTERM or POST /stop) and relaunch it") + "}");
            }
            else if (path.equals("/stop") && method.equals("POST"))
            {
                reply(ex, 202, "{\"stopping\":true}");
                Log.info("admin: POST /stop");
                stop.run();
            }
            else if (path.equals("/orders") && method.equals("GET"))
            {
                held(ex);
            }
            else if (path.equals("/metrics") && method.equals("GET"))
            {
                reply(ex, 200, metrics());
            }
            else
            {
                reply(ex, 404, "{\"error\":" + Json.str("no " + method + " " + path + "; this engine serves GET /status, GET /changes, POST /snapshot, " +
                    "POST /step-down, POST /stop, GET /metrics, GET /orders") + "}");
            }
        }
        catch (final RuntimeException e)
        {
            Log.error("admin " + ex.getRequestURI(), e);
            reply(ex, 500, "{\"error\":" + Json.str(e.toString()) + "}");
        }
        finally
        {
            ex.close();
        }
    }

    /**
     * Whether the request carries the run's bearer token; answers 401 itself when not, so every
     * handler on the admin server (this one, GcHandler) answers only the run's controller.
     */
    static boolean authorized(final HttpExchange ex, final byte[] token) throws IOException
    {
        final String auth = ex.getRequestHeaders().getFirst("Authorization");
        final byte[] got = auth != null && auth.startsWith("Bearer ") ? auth.substring(7).getBytes(StandardCharsets.UTF_8) : null;
        if (token.length == 0 || got == null || !MessageDigest.isEqual(got, token))
        {
            ex.getResponseHeaders().set("WWW-Authenticate", "Bearer realm=\"rig engine admin\"");
            reply(ex, 401, "{\"error\":\"admin API: missing or wrong bearer token (RIG_ADMIN_TOKEN, engine/contract.go)\"}");
            return false;
        }
        return true;
    }

    static void reply(final HttpExchange ex, final int code, final String body) throws IOException
    {
        final byte[] b = body.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(code, b.length);
        try (OutputStream os = ex.getResponseBody())
        {
            os.write(b);
        }
    }

    private CountersReader counters()
    {
        final ClusteredServiceContainer c = container;
        return c == null ? null : c.context().aeron().countersReader();
    }

    private int clusterId()
    {
        return container.context().clusterId();
    }

    private long counter(final CountersReader cr, final int typeId, final long dflt)
    {
        if (cr == null)
        {
            return dflt;
        }
        // Found once: a counter keeps its id for the life of the driver, and find scans them all.
        Integer id = counterIds.get(typeId);
        if (id == null || id < 0)
        {
            id = ClusterCounters.find(cr, typeId, clusterId());
            if (id >= 0)
            {
                counterIds.put(typeId, id);
            }
        }
        return id < 0 ? dflt : cr.getCounterValue(id);
    }

    /** The log recording's position: the archive's rec-pos counter for the log stream. */
    private long logRecordingPosition(final CountersReader cr, final int logStreamId)
    {
        final long[] max = {-1};
        cr.forEach((counterId, typeId, keyBuffer, label) ->
        {
            if (typeId == AeronCounters.ARCHIVE_RECORDING_POSITION_TYPE_ID)
            {
                final String[] f = label.split(" ");
                if (f.length > 3 && f[3].equals(Integer.toString(logStreamId)))
                {
                    max[0] = Math.max(max[0], cr.getCounterValue(counterId));
                }
            }
        });
        return max[0];
    }

    /**
     * One reading of the node: a status and a change key are made from the same reading, so a
     * change's status shows the state that was the change.
     */
    private record Reading(long roleCode, ElectionState election, long commit, long term, int leaderMember, long applied,
        long orders, NodeState.Snapshot snapshot, boolean serviceStarted, boolean restoring)
    {
    }

    private Reading read()
    {
        final CountersReader cr = counters();
        promoteSnapshot(cr);
        final long electionCode = counter(cr, AeronCounters.CLUSTER_ELECTION_STATE_TYPE_ID, -1);
        final ClusteredMediaDriver d = driver;
        // The consensus module's leader: the service hears of a leader only from a new leadership
        // term event in the log, which a follower that restored a snapshot taken later in the term
        // never replays, so it would report no leader until the next term.
        final ElectionState election = electionCode < 0 ? null : electionState(electionCode);
        int leader = d == null ? -1 : Compat.leaderMemberId(d.consensusModule());
        if (leader >= 0 && election == ElectionState.CLOSED)
        {
            state.leaderMemberId = leader; // the gateway's not-leader redirect names it too
        }
        else if (leader < 0)
        {
            leader = state.leaderMemberId;
        }
        return new Reading(counter(cr, AeronCounters.CLUSTER_NODE_ROLE_TYPE_ID, 0), election,
            Math.max(0, counter(cr, AeronCounters.CLUSTER_COMMIT_POSITION_TYPE_ID, 0)),
            Math.max(0, counter(cr, AeronCounters.CLUSTER_LEADERSHIP_TERM_ID_TYPE_ID, Math.max(0, state.leadershipTermId))),
            leader, state.applied, state.orders, state.lastSnapshot, state.serviceStarted, state.restoring);
    }

    /** Raises the phase (never lowered) for a reading and returns it; records where replay ended. */
    private synchronized int advance(final Reading r)
    {
        final int now = !r.serviceStarted() ? (r.restoring() ? 1 : 0) : phase(r.election(), r.roleCode());
        if (now > phase)
        {
            if (phase <= 3 && now >= 4)
            {
                launchLog = r.applied(); // where replaying the local log ended
            }
            final long at = BurstProbe.epochNanos();
            final PhaseLog pl = state.phases;
            if (pl != null && PHASE_KINDS[phase] != null)
            {
                pl.add(PHASE_KINDS[phase], PhaseLog.BLOCKS_READY, phaseSinceNs, at - phaseSinceNs,
                    PHASES[phase] + " until " + PHASES[now] + ", applied log position " + r.applied());
            }
            phase = now;
            phaseSinceNs = at;
        }
        return phase;
    }

    /**
     * The contract's role for a reading: Aeron's node role counter says candidate only while a
     * node's own ballot is open (CANDIDATE_BALLOT); a follower whose leader heartbeat timed out
     * has stopped following from CANVASS on, which is when Raft's follower becomes a candidate,
     * so CANVASS and NOMINATE are reported as candidate too (the failover's detection).
     */
    static String role(final long roleCode, final ElectionState election)
    {
        if (roleCode == 2)
        {
            return "leader";
        }
        if (roleCode == 1 || election == ElectionState.CANVASS || election == ElectionState.NOMINATE ||
            election == ElectionState.CANDIDATE_BALLOT)
        {
            return "candidate";
        }
        return "follower";
    }

    private static String role(final Reading r)
    {
        return role(r.roleCode(), r.election());
    }

    /** The leader's node name, or "" while none is known (an election is open). */
    private String leaderNode(final Reading r)
    {
        if (r.roleCode() == 2)
        {
            return cfg.node();
        }
        final int leader = r.leaderMember();
        if (leader >= 0 && leader < cfg.peers().size() && r.election() == ElectionState.CLOSED)
        {
            return cfg.peers().get(leader).node();
        }
        return "";
    }

    private String status(final boolean withHash)
    {
        String hash = "";
        long hashIndex = 0;
        long applied = -1;
        long orders = -1;
        if (withHash && !liveHash)
        {
            // No state hash of its own: the hash of the bytes of the last snapshot, at its position.
            final NodeState.SnapshotHash sh = state.snapshotHash;
            if (sh != null)
            {
                hash = String.format("%016x", sh.hash());
                hashIndex = sh.index();
            }
        }
        else if (withHash && state.serviceStarted)
        {
            // Waited for outside any lock: the watcher keeps checking meanwhile.
            final CompletableFuture<NodeState.Hash> f = new CompletableFuture<>();
            state.hashRequests.add(f);
            try
            {
                final NodeState.Hash h = f.get(5, TimeUnit.SECONDS);
                hash = String.format("%016x", h.hash());
                applied = h.applied();
                orders = h.orders();
            }
            catch (final Exception e)
            {
                Log.warn("state hash: the service thread did not answer within 5s: " + e);
            }
        }
        Reading r = read();
        if (applied >= 0)
        {
            r = new Reading(r.roleCode(), r.election(), r.commit(), r.term(), r.leaderMember(), applied, orders, r.snapshot(),
                r.serviceStarted(), r.restoring());
        }
        return render(r, advance(r), hash, hashIndex, Instant.now());
    }

    /** The status JSON of a reading, at phase ph (advance), stamped now. */
    private String render(final Reading r, final int ph, final String hash, final long hashIndex, final Instant now)
    {
        final CountersReader cr = counters();
        final ClusteredMediaDriver d = driver;
        final long applied = r.applied();
        long lastLog = d == null || cr == null ? -1 : logRecordingPosition(cr, d.consensusModule().context().logStreamId());
        if (lastLog < 0)
        {
            lastLog = Math.max(r.commit(), applied);
        }
        final StringBuilder sb = new StringBuilder(1024);
        sb.append('{');
        Json.field(sb, "node", cfg.node());
        Json.field(sb, "role", role(r));
        Json.field(sb, "phase", PHASES[ph]);
        final String leader = leaderNode(r);
        if (!leader.isEmpty())
        {
            Json.field(sb, "leader", leader);
        }
        Json.field(sb, "term", r.term());
        Json.field(sb, "commit_index", r.commit());
        Json.field(sb, "applied_index", applied);
        Json.field(sb, "last_log_index", lastLog);
        Json.field(sb, "launch_log_index", launchLog);
        final NodeState.Snapshot s = r.snapshot();
        if (s != null)
        {
            sb.append("\"last_snapshot\":{");
            Json.field(sb, "index", s.index());
            Json.field(sb, "term", Math.max(0, s.term()));
            Json.field(sb, "take_ms", s.takeMs());
            Json.field(sb, "encode_ms", s.takeMs());
            Json.field(sb, "persisted_ms", s.persistedMs());
            snapshotCounts(sb, s);
            snapshotWrites(sb, s);
            if (s.restored())
            {
                Json.field(sb, "restored", true);
                Json.field(sb, "restore_ms", s.restoreMs());
            }
            Json.close(sb);
            sb.append(',');
        }
        Json.field(sb, "orders", Math.max(0, r.orders()));
        Json.field(sb, "state_hash", hash);
        if (hashIndex > 0)
        {
            Json.field(sb, "state_hash_index", hashIndex);
        }
        sb.append("\"unsupported\":").append(Json.strings(unsupported())).append(',');
        state.traps.json(sb);
        Json.field(sb, "step_down", "relaunch");
        Json.field(sb, "pid", ProcessHandle.current().pid());
        Json.field(sb, "started", started.toString());
        Json.field(sb, "now", now.toString());
        Json.field(sb, "aeron_version", AERON_VERSION);
        Json.field(sb, "election_state", r.election() == null ? "none" : r.election().name());
        sb.append("\"ignored_properties\":").append(Json.strings(unreadProperties())).append(',');
        sb.append("\"config\":");
        config(sb);
        sb.append('}');
        return sb.toString();
    }

    /** GET /changes?since=V&wait=D: engine.Changes, answered at the next change after V or after D. */
    private void changes(final HttpExchange ex, final String query) throws IOException
    {
        long since = 0;
        long waitNs = 0;
        for (final String kv : query.split("&"))
        {
            final int eq = kv.indexOf('=');
            final String k = eq < 0 ? kv : kv.substring(0, eq);
            final String v = eq < 0 ? "" : java.net.URLDecoder.decode(kv.substring(eq + 1), StandardCharsets.UTF_8);
            if (k.equals("since") && !v.isEmpty())
            {
                try
                {
                    since = Long.parseLong(v);
                    if (since < 0)
                    {
                        throw new NumberFormatException("negative");
                    }
                }
                catch (final NumberFormatException e)
                {
                    reply(ex, 400, "{\"error\":" + Json.str("since " + v + ": want a version number") + "}");
                    return;
                }
            }
            else if (k.equals("wait") && !v.isEmpty())
            {
                try
                {
                    waitNs = Changes.parseGoDuration(v);
                }
                catch (final IllegalArgumentException e)
                {
                    waitNs = -1;
                }
                if (waitNs < 0 || waitNs > Changes.MAX_WAIT_NS)
                {
                    reply(ex, 400, "{\"error\":" + Json.str("wait " + v + ": want a Go duration from 0 to 1m0s") + "}");
                    return;
                }
            }
        }
        try
        {
            reply(ex, 200, changes.since(since, waitNs));
        }
        catch (final InterruptedException e)
        {
            Thread.currentThread().interrupt();
            reply(ex, 503, "{\"error\":\"interrupted\"}");
        }
    }

    /** The election state for a counter value, by Aeron's own enum; null for a code this Aeron does not know. */
    private static ElectionState electionState(final long code)
    {
        try
        {
            return ElectionState.get(code);
        }
        catch (final RuntimeException e)
        {
            return null;
        }
    }

    /**
     * The contract's phase (index in PHASES) for a started service, from Aeron's election state:
     * replay of the local log, then catch-up and log joining, then CLOSED (ready unless a candidate).
     */
    static int phase(final ElectionState election, final long roleCode)
    {
        if (election == null)
        {
            return 2;
        }
        switch (election)
        {
            case CLOSED:
                return roleCode == 1 ? 2 : 5;
            case LEADER_REPLAY:
            case FOLLOWER_REPLAY:
                return 3;
            case LEADER_INIT:
            case LEADER_READY:
            case FOLLOWER_CATCHUP_INIT:
            case FOLLOWER_CATCHUP_AWAIT:
            case FOLLOWER_CATCHUP:
            case FOLLOWER_LOG_INIT:
            case FOLLOWER_LOG_AWAIT:
            case FOLLOWER_READY:
                return 4;
            default:
                return 2;
        }
    }

    /** GET /metrics: the gateway's counts and, once found, the Archive's recorder counters since the node started. */
    private String metrics()
    {
        final Gateway g = gateway;
        final StringBuilder sb = new StringBuilder("{");
        Json.field(sb, "gateway_commands", g == null ? 0 : g.commands());
        Json.field(sb, "gateway_connected", g != null && g.connected());
        ArchiveWrites a = state.archive;
        final CountersReader cr = counters();
        if (a == null && cr != null)
        {
            a = ArchiveWrites.find(cr);
            state.archive = a;
        }
        if (a != null)
        {
            ArchiveWrites.json(sb, "archive_writes", a.read());
        }
        Json.close(sb);
        return sb.toString();
    }

    /** A snapshot's sizes; bytes and chunks only when the harness counted them on the snapshot stream. */
    static void snapshotCounts(final StringBuilder sb, final NodeState.Snapshot s)
    {
        if (s.bytes() >= 0)
        {
            Json.field(sb, "bytes", s.bytes());
            Json.field(sb, "chunks", s.chunks());
        }
        // Left out, not zero, when not counted: the harness never counts the Archive's syncs.
        if (s.orders() >= 0)
        {
            Json.field(sb, "orders", s.orders());
        }
    }

    /** The Archive's own writes over a taken snapshot's window, when its counters were read at the take and at the persist. */
    private void snapshotWrites(final StringBuilder sb, final NodeState.Snapshot s)
    {
        final NodeState.SnapshotWrites w = state.snapshotWrites;
        if (w != null && !s.restored() && w.index() == s.index())
        {
            ArchiveWrites.json(sb, "engine_writes", w.writes());
        }
    }

    /**
     * GET /orders: the held order ids the service's introspection gives, or else the correlation ids
     * of the ingress messages the node applied (AppliedRecord) (engine.HeldOrders, with its check).
     */
    private void held(final HttpExchange ex) throws IOException
    {
        final CompletableFuture<NodeState.Held> f = new CompletableFuture<>();
        state.heldRequests.add(f);
        final NodeState.Held h;
        try
        {
            h = f.get(10, TimeUnit.SECONDS);
        }
        catch (final Exception e)
        {
            reply(ex, 503, "{\"error\":" + Json.str("held orders: the service thread did not answer within 10s: " + e) + "}");
            return;
        }
        if (h.ranges() == null)
        {
            reply(ex, 404, "{\"error\":" + Json.str(h.error() == null ? "the service's introspection gives no held order ids" : h.error()) + "}");
            return;
        }
        final StringBuilder sb = new StringBuilder(64 + h.ranges().length * 24).append("{\"ranges\":[");
        for (int i = 0; i < h.ranges().length; i++)
        {
            // Order ids are unsigned 64-bit (docs/wire.md).
            sb.append(i > 0 ? ",[" : "[").append(Long.toUnsignedString(h.ranges()[i][0])).append(',')
                .append(Long.toUnsignedString(h.ranges()[i][1])).append(']');
        }
        sb.append("],");
        Json.field(sb, "known_from_index", h.knownFrom());
        Json.field(sb, "applied_index", h.applied());
        Json.field(sb, "check", h.check());
        Json.close(sb);
        reply(ex, 200, sb.toString());
    }

    /** The settings in effect, read from the running contexts (not from the properties given). */
    private void config(final StringBuilder sb)
    {
        sb.append('{');
        Json.field(sb, "node", cfg.node());
        Json.field(sb, "dir", cfg.dataDir().getPath());
        Json.field(sb, "raft_addr", cfg.raftAddr());
        Json.field(sb, "client_addr", cfg.clientAddr());
        Json.field(sb, "admin_addr", cfg.adminAddr());
        sb.append("\"peers\":[");
        for (int i = 0; i < cfg.peers().size(); i++)
        {
            final Node.Peer p = cfg.peers().get(i);
            sb.append(i > 0 ? ",{" : "{");
            Json.field(sb, "node", p.node());
            Json.field(sb, "raft_addr", p.raftAddr());
            Json.field(sb, "client_addr", p.clientAddr());
            Json.close(sb);
        }
        sb.append("],");
        Json.field(sb, "bootstrap", true);
        // The contexts the node runs with, read once launch has concluded them (a context's
        // suppliers are set by its conclude): from the first /status after launch, before any
        // election can fail for a setting.
        final ClusteredMediaDriver d = driver;
        if (d != null)
        {
            final Archive.Context a = d.archive().context();
            final ConsensusModule.Context cm = d.consensusModule().context();
            final MediaDriver.Context md = d.mediaDriver().context();
            // The contract's names (what a rig playbook's engine section asks for) ...
            Json.field(sb, "sync_level", Compat.intOf(a, "fileSyncLevel"));
            Json.field(sb, "snapshot_block", a.fileIoMaxLength());
            Json.field(sb, "encode_threads", 1); // onTakeSnapshot runs on the service thread: no parallel encode
            Json.field(sb, "heartbeat_timeout", cm.leaderHeartbeatTimeoutNs() + "ns");
            Json.field(sb, "election_timeout", cm.electionTimeoutNs() + "ns");
            // ... and Aeron's own property names, durations in nanoseconds as Aeron holds them.
            Json.field(sb, Archive.Configuration.FILE_SYNC_LEVEL_PROP_NAME, Compat.intOf(a, "fileSyncLevel"));
            Json.field(sb, Archive.Configuration.CATALOG_FILE_SYNC_LEVEL_PROP_NAME, Compat.intOf(a, "catalogFileSyncLevel"));
            Json.field(sb, Archive.Configuration.FILE_IO_MAX_LENGTH_PROP_NAME, a.fileIoMaxLength());
            Json.field(sb, Archive.Configuration.THREADING_MODE_PROP_NAME, a.threadingMode().name());
            Json.field(sb, ConsensusModule.Configuration.LEADER_HEARTBEAT_TIMEOUT_PROP_NAME, cm.leaderHeartbeatTimeoutNs());
            Json.field(sb, ConsensusModule.Configuration.LEADER_HEARTBEAT_INTERVAL_PROP_NAME, cm.leaderHeartbeatIntervalNs());
            Json.field(sb, ConsensusModule.Configuration.ELECTION_TIMEOUT_PROP_NAME, cm.electionTimeoutNs());
            Json.field(sb, ConsensusModule.Configuration.FILE_SYNC_LEVEL_PROP_NAME, Compat.intOf(cm, "fileSyncLevel"));
            idle(sb, ClusteredServiceContainer.Configuration.CLUSTER_IDLE_STRATEGY_PROP_NAME, cm.idleStrategy());
            Json.field(sb, io.aeron.driver.Configuration.THREADING_MODE_PROP_NAME, md.threadingMode().name());
            idle(sb, io.aeron.driver.Configuration.SHARED_IDLE_STRATEGY_PROP_NAME, md.sharedIdleStrategy());
            idle(sb, io.aeron.driver.Configuration.CONDUCTOR_IDLE_STRATEGY_PROP_NAME, md.conductorIdleStrategy());
            idle(sb, io.aeron.driver.Configuration.SENDER_IDLE_STRATEGY_PROP_NAME, md.senderIdleStrategy());
            idle(sb, io.aeron.driver.Configuration.RECEIVER_IDLE_STRATEGY_PROP_NAME, md.receiverIdleStrategy());
            Json.field(sb, io.aeron.driver.Configuration.PUBLICATION_CONNECTION_TIMEOUT_PROP_NAME, md.publicationConnectionTimeoutNs());
            Json.field(sb, io.aeron.driver.Configuration.PUBLICATION_UNBLOCK_TIMEOUT_PROP_NAME, md.publicationUnblockTimeoutNs());
            Json.field(sb, io.aeron.driver.Configuration.IMAGE_LIVENESS_TIMEOUT_PROP_NAME, md.imageLivenessTimeoutNs());
            Json.field(sb, io.aeron.driver.Configuration.TERM_BUFFER_SPARSE_FILE_PROP_NAME, md.termBufferSparseFile() ? "true" : "false");
            Json.field(sb, io.aeron.driver.Configuration.INITIAL_WINDOW_LENGTH_PROP_NAME, md.initialWindowLength());
            Json.field(sb, io.aeron.driver.Configuration.SOCKET_RCVBUF_LENGTH_PROP_NAME, md.socketRcvbufLength());
            Json.field(sb, io.aeron.driver.Configuration.TERM_BUFFER_LENGTH_PROP_NAME, md.publicationTermBufferLength());
            final ClusteredServiceContainer c = container;
            if (c != null)
            {
                Json.field(sb, io.aeron.Aeron.Configuration.IDLE_SLEEP_DURATION_PROP_NAME, c.context().aeron().context().idleSleepDurationNs());
            }
            Json.field(sb, ConsensusModule.Configuration.LOG_CHANNEL_PROP_NAME, cm.logChannel());
        }
        Json.field(sb, "gc", collector());
        Json.field(sb, "heap", maxHeap());
        Json.close(sb);
    }

    /** An idle strategy's alias, for the driver's agents the threading mode runs (the others have none). */
    private static void idle(final StringBuilder sb, final String name, final org.agrona.concurrent.IdleStrategy s)
    {
        if (s != null)
        {
            Json.field(sb, name, s.alias());
        }
    }

    /** The collector the JVM runs, from its GC MXBeans: g1, zgc, shenandoah, parallel or serial. */
    static String collector()
    {
        final List<String> names = new ArrayList<>();
        for (final GarbageCollectorMXBean b : ManagementFactory.getGarbageCollectorMXBeans())
        {
            names.add(b.getName());
        }
        final String all = String.join(",", names);
        if (all.contains("G1"))
        {
            return "g1";
        }
        if (all.contains("ZGC"))
        {
            return "zgc";
        }
        if (all.contains("Shenandoah"))
        {
            return "shenandoah";
        }
        if (all.contains("PS "))
        {
            return "parallel";
        }
        if (all.contains("Copy") || all.contains("MarkSweepCompact"))
        {
            return "serial";
        }
        return all;
    }

    /** -Xmx in effect, in bytes (the VM option MaxHeapSize). */
    static long maxHeap()
    {
        final HotSpotDiagnosticMXBean b = ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class);
        return Long.parseLong(b.getVMOption("MaxHeapSize").getValue());
    }

    /** Every property name Aeron's configuration classes declare (their *_PROP_NAME constants). */
    private static Set<String> knownProperties()
    {
        final Set<String> out = new TreeSet<>();
        final Class<?>[] classes = {io.aeron.driver.Configuration.class, io.aeron.Aeron.Configuration.class, io.aeron.CommonContext.class,
            Archive.Configuration.class, AeronArchive.Configuration.class, ConsensusModule.Configuration.class,
            ClusteredServiceContainer.Configuration.class, AeronCluster.Configuration.class};
        for (final Class<?> k : classes)
        {
            for (final Field f : k.getFields())
            {
                if (Modifier.isStatic(f.getModifiers()) && f.getType() == String.class && f.getName().endsWith("PROP_NAME"))
                {
                    try
                    {
                        out.add((String)f.get(null));
                    }
                    catch (final IllegalAccessException ignored)
                    {
                        // not public after all
                    }
                }
            }
        }
        return out;
    }

    private static final Set<String> KNOWN = knownProperties();

    /** aeron.* system properties that no Aeron configuration reads: a misspelt or retired name does nothing. */
    static List<String> unreadProperties()
    {
        final List<String> out = new ArrayList<>();
        for (final String k : new TreeSet<>(System.getProperties().stringPropertyNames()))
        {
            if (k.startsWith("aeron.") && !KNOWN.contains(k))
            {
                out.add(k);
            }
        }
        return out;
    }

    /** Makes the service's last snapshot the reported one once the consensus module has completed it. */
    private void promoteSnapshot(final CountersReader cr)
    {
        if (state.pendingSnapshot != null && cr != null)
        {
            state.promoteSnapshot(counter(cr, AeronCounters.CLUSTER_SNAPSHOT_COUNTER_TYPE_ID, 0), System.nanoTime());
        }
    }

    private void snapshot(final HttpExchange ex) throws IOException
    {
        final CountersReader cr = counters();
        if (cr == null || counter(cr, AeronCounters.CLUSTER_NODE_ROLE_TYPE_ID, 0) != 2)
        {
            reply(ex, 409, "{\"error\":\"not the leader: POST /snapshot on the node whose /status role is leader\"}");
            return;
        }
        final AtomicCounter toggle = ClusterControl.findControlToggle(cr, clusterId());
        if (toggle == null)
        {
            reply(ex, 503, "{\"error\":\"no cluster control toggle counter (type 202) yet\"}");
            return;
        }
        final long before = state.snapshotsTaken;
        if (!ClusterControl.ToggleState.SNAPSHOT.toggle(toggle))
        {
            reply(ex, 409, "{\"error\":" + Json.str("cluster control toggle is " + ClusterControl.ToggleState.get(toggle) +
                ", not NEUTRAL: another action is under way") + "}");
            return;
        }
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (state.snapshotsTaken == before)
        {
            promoteSnapshot(cr);
            if (System.nanoTime() > deadline)
            {
                reply(ex, 504, "{\"error\":\"the service took no snapshot within 60s of the SNAPSHOT toggle\"}");
                return;
            }
            try
            {
                Thread.sleep(2);
            }
            catch (final InterruptedException e)
            {
                Thread.currentThread().interrupt();
                return;
            }
        }
        final NodeState.Snapshot s = state.lastSnapshot;
        final StringBuilder sb = new StringBuilder("{");
        Json.field(sb, "index", s.index());
        Json.field(sb, "term", Math.max(0, s.term()));
        Json.field(sb, "take_ms", s.takeMs());
        Json.field(sb, "encode_ms", s.takeMs());
        Json.field(sb, "persisted_ms", s.persistedMs());
        snapshotCounts(sb, s);
        snapshotWrites(sb, s);
        Json.close(sb);
        reply(ex, 200, sb.toString());
    }
}
