package dev.rig.aeron;

import io.aeron.AeronCounters;
import io.aeron.cluster.ElectionState;
import io.aeron.security.Authenticator;
import io.aeron.security.SessionProxy;
import java.nio.ByteBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.CountersManager;

/**
 * Checks of the harness that need no cluster, run by examples/aeron-cluster/aeron_test.go
 * (java -cp ... dev.rig.aeron.HarnessSelfTest): the Aeron version check at start, the phases
 * read from Aeron's election states, a snapshot's Archive writes from the recorder's counters and
 * the preload's receiver window, and who the archive and the ingress accept. Prints one line per check and exits 1 if any failed.
 */
public final class HarnessSelfTest
{
    private static int failed;

    private HarnessSelfTest()
    {
    }

    private static void check(final String name, final boolean ok, final String seen)
    {
        System.out.println((ok ? "pass " : "FAIL ") + name + ": " + seen);
        if (!ok)
        {
            failed++;
        }
    }

    /** A counters file with the given type ids allocated for cluster 0 (the key's first int is the cluster id, as Aeron's). */
    private static CountersManager counters(final int... typeIds)
    {
        final CountersManager cm = new CountersManager(new UnsafeBuffer(ByteBuffer.allocateDirect(64 * 1024)),
            new UnsafeBuffer(ByteBuffer.allocateDirect(8 * 1024)));
        final UnsafeBuffer key = new UnsafeBuffer(new byte[4]);
        for (final int t : typeIds)
        {
            key.putInt(0, 0);
            cm.allocate(t, key, 0, 4, new UnsafeBuffer("x".getBytes()), 0, 1);
        }
        return cm;
    }

    /** What Log printed while run ran (it writes to System.out). */
    private static String captured(final Runnable run)
    {
        final java.io.PrintStream was = System.out;
        final java.io.ByteArrayOutputStream b = new java.io.ByteArrayOutputStream();
        System.setOut(new java.io.PrintStream(b, true, java.nio.charset.StandardCharsets.UTF_8));
        try
        {
            run.run();
        }
        finally
        {
            System.setOut(was);
        }
        return b.toString(java.nio.charset.StandardCharsets.UTF_8);
    }

    /** A change check failing on every turn is logged once with its stack trace, then once with its count when it ends. */
    private static void repeatedError()
    {
        final String out = captured(() ->
        {
            final RepeatedError e = new RepeatedError("admin: change check");
            for (int i = 0; i < 1000; i++)
            {
                e.failed(new NullPointerException("idleStrategySupplier"));
            }
            e.ok();
            e.ok();
        });
        final long traces = out.lines().filter(l -> l.startsWith("\tat ")).map(l -> "").count();
        final long errors = out.lines().filter(l -> l.contains(" ERROR ")).count();
        check("an error on every change check is logged once, then its count",
            errors == 1 && traces > 0 && out.contains("failed 1000 times in a row: java.lang.NullPointerException: idleStrategySupplier") &&
            out.lines().count() == traces + 3, errors + " error lines, " + traces + " stack lines, " + out.lines().count() + " lines");
    }

    /**
     * The change watcher's pace on an injected clock: fast while the node starts, while an election
     * is open and for a while after a change; slow once settled. No timing is measured.
     */
    private static void watchPace()
    {
        final long ms = 1_000_000L;
        final WatchPace p = new WatchPace();
        final StringBuilder seen = new StringBuilder();
        final long[][] steps = {
            // now (ms), settled, changed, expected sleep
            {0, 0, 1, WatchPace.FAST_NS}, // starting
            {500, 0, 0, WatchPace.FAST_NS}, // still starting
            {1000, 1, 1, WatchPace.FAST_NS}, // just became ready
            {1000 + WatchPace.SETTLE_NS / ms - 1, 1, 0, WatchPace.FAST_NS}, // within the settle window
            {1000 + WatchPace.SETTLE_NS / ms, 1, 0, WatchPace.STEADY_NS}, // settled
            {60_000, 1, 0, WatchPace.STEADY_NS}, // a steady minute
            {60_001, 0, 1, WatchPace.FAST_NS}, // an election opened
            {90_000, 0, 0, WatchPace.FAST_NS}, // a long election stays fast
            {90_001, 1, 1, WatchPace.FAST_NS}, // closed: fast for the settle window
            {90_001 + WatchPace.SETTLE_NS / ms, 1, 0, WatchPace.STEADY_NS},
        };
        boolean ok = WatchPace.STEADY_NS >= 20 * WatchPace.FAST_NS;
        for (final long[] s : steps)
        {
            final long got = p.next(s[0] * ms, s[1] == 1, s[2] == 1);
            seen.append(s[0]).append("ms:").append(got / 1000).append("us ");
            ok &= got == s[3];
        }
        check("the change watcher checks fast only while unsettled or just after a change", ok, seen.toString().trim());

        final CountersManager cm = counters();
        final org.agrona.concurrent.status.AtomicCounter election = cm.newCounter("x", AeronCounters.CLUSTER_ELECTION_STATE_TYPE_ID);
        final org.agrona.concurrent.status.AtomicCounter role = cm.newCounter("x", AeronCounters.CLUSTER_NODE_ROLE_TYPE_ID);
        final org.agrona.concurrent.status.AtomicCounter snap = cm.newCounter("x", AeronCounters.CLUSTER_SNAPSHOT_COUNTER_TYPE_ID);
        election.set(ElectionState.CLOSED.code());
        final int[] idles = {0};
        final int[] wakes = {0};
        final boolean[] found = {false};
        final ChangeSignal sig = new ChangeSignal(new org.agrona.concurrent.IdleStrategy()
        {
            public void idle(final int workCount)
            {
                idles[0]++;
            }

            public void idle()
            {
                idles[0]++;
            }

            public void reset()
            {
            }
        }, () -> found[0] ? new org.agrona.concurrent.status.AtomicCounter[] {election, role, snap} : null, () -> wakes[0]++);
        final StringBuilder w = new StringBuilder();
        sig.idle(0); // the counters do not exist yet
        w.append(wakes[0]);
        found[0] = true;
        sig.idle(0); // found: one wake, as the watcher has not read them yet
        sig.idle(0);
        sig.idle(1);
        w.append(',').append(wakes[0]);
        election.set(ElectionState.CANVASS.code());
        sig.idle(0);
        sig.idle(0);
        w.append(',').append(wakes[0]);
        role.set(2);
        snap.increment();
        sig.idle();
        w.append(',').append(wakes[0]);
        check("the consensus module's idle wakes the watcher once per counter move", w.toString().equals("0,1,2,3") && idles[0] == 7,
            "wakes after each step " + w + ", inner idles " + idles[0]);
    }

    /** The stop holds the driver until the log stream's network publications have sent all they hold. */
    private static void endOfStream()
    {
        final CountersManager cm = new CountersManager(new UnsafeBuffer(ByteBuffer.allocateDirect(64 * 1024)),
            new UnsafeBuffer(ByteBuffer.allocateDirect(8 * 1024)));
        final java.util.function.BiFunction<Integer, long[], org.agrona.concurrent.status.AtomicCounter> add = (type, regStream) ->
        {
            final UnsafeBuffer key = new UnsafeBuffer(new byte[io.aeron.driver.status.StreamCounter.CHANNEL_OFFSET]);
            key.putLong(io.aeron.driver.status.StreamCounter.REGISTRATION_ID_OFFSET, regStream[0]);
            key.putInt(io.aeron.driver.status.StreamCounter.STREAM_ID_OFFSET, (int)regStream[1]);
            return cm.newCounter(type, key, 0, key.capacity(), new UnsafeBuffer("x".getBytes()), 0, 1);
        };
        final org.agrona.concurrent.status.AtomicCounter pub = add.apply(AeronCounters.DRIVER_PUBLISHER_POS_TYPE_ID, new long[] {7, 100});
        final org.agrona.concurrent.status.AtomicCounter snd = add.apply(AeronCounters.DRIVER_SENDER_POSITION_TYPE_ID, new long[] {7, 100});
        add.apply(AeronCounters.DRIVER_PUBLISHER_POS_TYPE_ID, new long[] {8, 100}).set(4096); // IPC: no sender
        final org.agrona.concurrent.status.AtomicCounter other = add.apply(AeronCounters.DRIVER_PUBLISHER_POS_TYPE_ID, new long[] {9, 108});
        add.apply(AeronCounters.DRIVER_SENDER_POSITION_TYPE_ID, new long[] {9, 108});
        other.set(1 << 20);
        pub.set(8192);
        snd.set(4096);
        final boolean unsent = GracefulStop.drained(cm, 100);
        snd.set(8192);
        final boolean sent = GracefulStop.drained(cm, 100);
        final long t0 = System.nanoTime();
        final String held = GracefulStop.holdForEndOfStream(cm, 100, 5_000_000_000L);
        final long heldMs = (System.nanoTime() - t0) / 1_000_000;
        snd.set(0);
        final long t1 = System.nanoTime();
        final String stuck = GracefulStop.holdForEndOfStream(cm, 100, 50_000_000L);
        final long stuckMs = (System.nanoTime() - t1) / 1_000_000;
        check("the stop holds the driver until the log publication sent all, then two heartbeats; the linger timeout bounds it",
            !unsent && sent && heldMs >= 2 * io.aeron.driver.Configuration.PUBLICATION_HEARTBEAT_TIMEOUT_NS / 1_000_000 &&
            held.contains("then held 2 publication heartbeats") && stuckMs >= 50 && stuckMs < 1000 && stuck.contains("had not sent everything"),
            "drained while unsent " + unsent + ", once sent " + sent + ", held " + heldMs + " ms: " + held + "; stuck " + stuckMs + " ms: " + stuck);
    }

    /** POST /stop starts the graceful stop only with the admin secret; without it, 401 and nothing happens. */
    private static void stopNeedsTheSecret() throws Exception
    {
        final java.io.File dir = java.nio.file.Files.createTempDirectory("rig-aeron-admin").toFile();
        final Node.Config cfg = new Node.Config("node-0", 0, dir, "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:0",
            java.util.List.of(new Node.Peer("node-0", "127.0.0.1:1", "127.0.0.1:2")), new java.io.File(dir, "node.properties"), false);
        final java.util.concurrent.atomic.AtomicInteger stops = new java.util.concurrent.atomic.AtomicInteger();
        final Admin admin = new Admin(cfg, new NodeState(), "s3cret", new Introspection()
        {
        }, stops::incrementAndGet);
        admin.bind(new java.net.InetSocketAddress("127.0.0.1", 0));
        final java.net.http.HttpClient http = java.net.http.HttpClient.newHttpClient();
        final java.util.function.BiFunction<String, String, Integer> post = (path, auth) ->
        {
            final java.net.http.HttpRequest.Builder b = java.net.http.HttpRequest.newBuilder(
                java.net.URI.create("http://127.0.0.1:" + admin.port() + path)).POST(java.net.http.HttpRequest.BodyPublishers.noBody());
            if (auth != null)
            {
                b.header("Authorization", auth);
            }
            try
            {
                return http.send(b.build(), java.net.http.HttpResponse.BodyHandlers.discarding()).statusCode();
            }
            catch (final Exception e)
            {
                return -1;
            }
        };
        final int none = post.apply("/stop", null);
        final int wrong = post.apply("/stop", "Bearer s3cre");
        final int stepDown = post.apply("/step-down", "Bearer s3cret");
        final int stopsBefore = stops.get();
        final int right = post.apply("/stop", "Bearer s3cret");
        admin.close();
        check("POST /stop needs the admin secret (401 without it) and then starts the stop; POST /step-down says relaunch",
            none == 401 && wrong == 401 && stopsBefore == 0 && stepDown == 409 && right == 202 && stops.get() == 1,
            "no secret " + none + ", wrong " + wrong + ", step-down " + stepDown + ", right " + right + ", stops " + stops.get());
    }

    /** Mark files a clean stop left are kept at the next launch; after a kill they are removed. */
    private static void markFiles() throws java.io.IOException
    {
        final java.io.File base = java.nio.file.Files.createTempDirectory("rig-aeron-marks").toFile();
        final java.io.File mark = new java.io.File(base, "cluster/cluster-mark.dat");
        mark.getParentFile().mkdirs();
        java.nio.file.Files.writeString(mark.toPath(), "m");
        java.nio.file.Files.writeString(new java.io.File(base, GracefulStop.CLEAN_STOP_FILE).toPath(), "t");
        final String[] out = new String[2];
        final boolean[] kept = new boolean[2];
        for (int i = 0; i < 2; i++)
        {
            final int n = i;
            out[n] = captured(() ->
            {
                try
                {
                    Node.lockDataDir(base).close();
                }
                catch (final java.io.IOException e)
                {
                    throw new java.io.UncheckedIOException(e);
                }
            });
            kept[n] = mark.exists();
        }
        check("mark files a clean stop closed are kept without a word; after a kill they are removed as left unclosed",
            kept[0] && out[0].isEmpty() && !new java.io.File(base, GracefulStop.CLEAN_STOP_FILE).exists() &&
            !kept[1] && out[1].contains("left by a process that ended without closing it"), out[0] + " | " + out[1]);
    }

    /** The Archive recorder's counters read at a take and at its persist give the window's bytes and time. */
    private static void archiveWrites()
    {
        check("no archive recorder counters: not reported", ArchiveWrites.find(counters(AeronCounters.ARCHIVE_RECORDER_TOTAL_WRITE_BYTES_TYPE_ID)) == null,
            "find with only type 106");
        final CountersManager cm = counters(AeronCounters.ARCHIVE_RECORDER_MAX_WRITE_TIME_TYPE_ID,
            AeronCounters.ARCHIVE_RECORDER_TOTAL_WRITE_BYTES_TYPE_ID, AeronCounters.ARCHIVE_RECORDER_TOTAL_WRITE_TIME_TYPE_ID);
        cm.setCounterValue(0, 9_000_000L);
        cm.setCounterValue(1, 1_000L);
        cm.setCounterValue(2, 5_000_000L);
        final NodeState st = new NodeState();
        st.archive = ArchiveWrites.find(cm);
        st.pendingWritesStart = st.archive == null ? null : st.archive.read();
        st.pendingStartNs = 0;
        st.pendingCount = 1;
        st.pendingSnapshot = new NodeState.Snapshot(77, 1, 10, 10, -1, 5, -1, false, 0);
        // The take wrote 29,957,920 bytes in 240 ms; then the snapshot counter moves and it is persisted.
        cm.setCounterValue(1, 1_000L + 29_957_920L);
        cm.setCounterValue(2, 245_000_000L);
        st.promoteSnapshot(2, 300_000_000L);
        cm.setCounterValue(1, 99_999_999L); // later writes do not move a persisted snapshot's figures
        final NodeState.SnapshotWrites w = st.snapshotWrites;
        check("a snapshot's archive writes are the counters' change from its take to its persist",
            w != null && w.index() == 77 && w.writes().bytes() == 29_957_920L && w.writes().timeNs() == 240_000_000L &&
            w.writes().maxNs() == 9_000_000L && st.lastSnapshot != null && st.lastSnapshot.persistedMs() == 300,
            String.valueOf(w));
        final StringBuilder sb = new StringBuilder("{");
        ArchiveWrites.json(sb, "engine_writes", w == null ? new ArchiveWrites.Sample(0, 0, 0) : w.writes());
        Json.close(sb);
        check("engine_writes as JSON (engine.EngineWrites)", sb.toString().equals(
            "{\"engine_writes\":{\"source\":\"aeron archive recorder counters (types 106, 107, 105)\",\"bytes\":29957920," +
            "\"time_ms\":240.000,\"max_ms\":9.000}}"), sb.toString());
    }

    /** What one connect with these credentials comes to: authenticated, rejected or still pending. */
    private static String connect(final Authenticator a, final long id, final byte[] credentials)
    {
        a.onConnectRequest(id, credentials, 0);
        final String[] seen = {"pending"};
        a.onConnectedSession(new SessionProxy()
        {
            public long sessionId()
            {
                return id;
            }

            public boolean challenge(final byte[] encodedChallenge)
            {
                seen[0] = "challenged";
                return true;
            }

            public boolean authenticate(final byte[] encodedPrincipal)
            {
                seen[0] = "authenticated";
                return true;
            }

            public void reject()
            {
                seen[0] = "rejected";
            }
        }, 0);
        return seen[0];
    }

    /** The archive and the ingress accept the run's own credential for each, and nothing else. */
    private static void runAuth()
    {
        final String secret = "the-runs-secret-0123456789";
        final RunAuth run = new RunAuth(secret.getBytes(java.nio.charset.StandardCharsets.UTF_8));
        final RunAuth other = new RunAuth("another-runs-secret".getBytes(java.nio.charset.StandardCharsets.UTF_8));
        final Authenticator archive = run.archiveAuthenticator().get();
        final Authenticator ingress = run.ingressAuthenticator().get();
        final byte[] own = RunAuth.archiveCredentials(run).encodedCredentials();
        final byte[] flipped = own.clone();
        flipped[flipped.length - 1] ^= 1;
        final String seen = String.join(", ", connect(archive, 1, own), connect(archive, 2, RunAuth.archiveCredentials(other).encodedCredentials()),
            connect(archive, 3, RunAuth.ingressCredentials(run).encodedCredentials()), connect(archive, 4, flipped),
            connect(archive, 5, RunAuth.archiveCredentials(null).encodedCredentials()), connect(archive, 6, secret.getBytes()),
            connect(ingress, 7, RunAuth.ingressCredentials(run).encodedCredentials()), connect(ingress, 8, own));
        check("the archive and the ingress accept only the run's credential for each",
            seen.equals("authenticated, rejected, rejected, rejected, rejected, rejected, authenticated, rejected"),
            "own, other run's, ingress's, one bit off, none, the raw secret; ingress: own, archive's: " + seen);
        final String shown = run.archiveAuthenticator() + " " + archive + " " + RunAuth.archiveCredentials(run) + " " +
            RunAuth.ingressCredentials(run) + " " + java.util.HexFormat.of().formatHex(own);
        check("the run's secret is in no toString", !shown.contains(secret) && !RunAuth.archiveCredentials(run).toString().contains(
            java.util.HexFormat.of().formatHex(own)), RunAuth.archiveCredentials(run) + ", " + archive);
    }

    /** The receiver window and socket buffers a preload needs, unless a -D says otherwise, capped by the kernel. */
    private static void bulkDefaults()
    {
        check("an unreadable sysctl gives its default", Node.sysctl("/nonexistent/rmem_max", 7) == 7, "7");
        System.clearProperty("aeron.socket.so_rcvbuf");
        System.clearProperty("aeron.rcv.initial.window.length");
        System.setProperty("aeron.socket.so_sndbuf", "262144");
        Node.smallMachineDefaults();
        final long rcv = Math.min(Node.BULK_WINDOW, Node.sysctl("/proc/sys/net/core/rmem_max", Node.BULK_WINDOW));
        check("receiver window and buffers default to 4 MiB capped by rmem_max; a -D stays",
            Long.toString(rcv).equals(System.getProperty("aeron.socket.so_rcvbuf")) &&
            Long.toString(rcv).equals(System.getProperty("aeron.rcv.initial.window.length")) &&
            "262144".equals(System.getProperty("aeron.socket.so_sndbuf")),
            "so_rcvbuf " + System.getProperty("aeron.socket.so_rcvbuf") + ", window " + System.getProperty("aeron.rcv.initial.window.length") +
            ", so_sndbuf " + System.getProperty("aeron.socket.so_sndbuf"));
    }

    /** An interface implemented by answering each call with answer (primitives get their zero when it gives null). */
    @SuppressWarnings("unchecked")
    private static <T> T proxy(final Class<T> type, final java.util.function.BiFunction<String, Object[], Object> answer)
    {
        return (T)java.lang.reflect.Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, (p, m, args) ->
        {
            final Object v = answer.apply(m.getName(), args);
            if (v != null || !m.getReturnType().isPrimitive() || m.getReturnType() == void.class)
            {
                return v;
            }
            return m.getReturnType() == boolean.class ? false : m.getReturnType() == long.class ? (Object)0L : (Object)0;
        });
    }

    /**
     * A codec that answers with a wrong correlation id is counted and named by the gateway; a
     * service that throws on a message has the request answered rejected with the exception (once,
     * by the leader), is counted, and still throws to its container.
     */
    private static void traps() throws java.io.IOException
    {
        final NodeState state = new NodeState();
        final RigCodec wrong = new RigCodec()
        {
            public int encodeOrder(final long correlationId, final WireOrder order, final org.agrona.MutableDirectBuffer out, final int offset)
            {
                return 0;
            }

            public long ingressCorrelationId(final org.agrona.DirectBuffer buffer, final int offset, final int length)
            {
                return buffer.getLong(offset);
            }

            public boolean decodeEgress(final org.agrona.DirectBuffer buffer, final int offset, final int length, final Reply reply)
            {
                reply.correlationId = buffer.getLong(offset) + 1_000_000;
                return true;
            }
        };
        final io.aeron.cluster.service.ClusteredService throwing = proxy(io.aeron.cluster.service.ClusteredService.class, (m, a) ->
        {
            if (m.equals("onSessionMessage"))
            {
                throw new IllegalStateException("book full");
            }
            return null;
        });
        final io.aeron.cluster.service.Cluster cluster = proxy(io.aeron.cluster.service.Cluster.class,
            (m, a) -> m.equals("logPosition") ? (Object)4096L : null);
        final java.util.List<byte[]> offered = new java.util.ArrayList<>();
        final io.aeron.cluster.service.ClientSession session = proxy(io.aeron.cluster.service.ClientSession.class, (m, a) ->
        {
            if (m.equals("offer") && a.length == 3)
            {
                final org.agrona.DirectBuffer b = (org.agrona.DirectBuffer)a[0];
                final byte[] copy = new byte[(int)a[2]];
                b.getBytes((int)a[1], copy);
                offered.add(copy);
                return 1L;
            }
            return null;
        });
        final RigService decorated = new RigService(throwing, wrong, new Introspection()
        {
        }, state, java.nio.file.Files.createTempDirectory("rig-traps").toFile());
        decorated.onStart(cluster, null);
        final UnsafeBuffer msg = new UnsafeBuffer(new byte[8]);
        final String log = captured(() ->
        {
            for (final io.aeron.cluster.service.Cluster.Role role : new io.aeron.cluster.service.Cluster.Role[] {
                io.aeron.cluster.service.Cluster.Role.FOLLOWER, io.aeron.cluster.service.Cluster.Role.LEADER})
            {
                state.role = role;
                msg.putLong(0, role == io.aeron.cluster.service.Cluster.Role.LEADER ? 7 : 6);
                try
                {
                    decorated.onSessionMessage(session, 0, msg, 0, 8, null);
                }
                catch (final IllegalStateException e)
                {
                    state.positions.put(-1L, -1L); // marks that the container saw it
                }
            }
        });
        final Reply r = new Reply();
        final boolean read = offered.size() == 1 && Traps.readError(new UnsafeBuffer(offered.get(0)), 0, offered.get(0).length, r);
        check("a service exception answers its request rejected naming the exception, once, and is counted",
            state.positions.containsKey(-1L) && state.traps.serviceErrors() == 2 && read && r.correlationId == 7 &&
            r.status == Reply.REJECTED && r.text.equals("the service threw java.lang.IllegalStateException: book full") &&
            log.lines().filter(l -> l.contains(" ERROR ") && l.contains("book full")).count() == 1,
            offered.size() + " offered, " + state.traps.serviceErrors() + " counted, read " + read + " id " + r.correlationId + " status " +
            r.status + " text " + r.text + "; log: " + log.lines().findFirst().orElse(""));

        final Gateway g = new Gateway(new Node.Config("node-0", 0, new java.io.File("."), "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:0",
            java.util.List.of(), null, false), state, ".", wrong, "Svc", null);
        final String glog = captured(() ->
        {
            g.onEgress(new UnsafeBuffer(offered.get(0)), 0, offered.get(0).length); // the harness's own answer: not the codec's
            final UnsafeBuffer egress = new UnsafeBuffer(new byte[8]);
            for (int i = 1; i <= 3; i++)
            {
                egress.putLong(0, i);
                g.onEgress(egress, 0, 8);
            }
        });
        final StringBuilder sb = new StringBuilder("{");
        state.traps.json(sb);
        final String json = sb.toString();
        check("replies that match no request are counted and named with the codec and the first id",
            state.traps.unmatched() == 3 && json.contains("\"unmatched_replies\":3,\"first_unmatched_id\":1000001,") &&
            json.contains("\"codec\":\"dev.rig.aeron.HarnessSelfTest$") && json.contains("\"service_errors\":2,") &&
            state.traps.kinds().equals(java.util.List.of("unmatched_replies", "service_errors")) &&
            glog.lines().filter(l -> l.contains("decodeEgress returned correlation id 1000001")).count() == 1,
            json + " | " + glog);
    }

    /** The applied record keeps what a snapshot covers across a relaunch and drops what the replay applies again. */
    private static void appliedRecord() throws Exception
    {
        final java.io.File dir = java.nio.file.Files.createTempDirectory("rig-applied").toFile();
        final long probe = Long.MIN_VALUE | 7L << 32; // a probe id: bit 63 set, unsigned
        AppliedRecord r = new AppliedRecord(dir);
        r.restart(-1);
        r.applied(64, probe | 1);
        r.applied(128, probe | 2);
        r.applied(192, 3);
        r.snapshot(192);
        r.applied(256, probe | 4);
        r.applied(320, probe | 9);
        r.flush();
        final String live = java.util.Arrays.deepToString(r.ranges());
        // Relaunched from the snapshot at 192: the replay applies 256 and 320 again (here only 256).
        r = new AppliedRecord(dir);
        r.restart(192);
        r.applied(256, probe | 4);
        final String relaunched = java.util.Arrays.deepToString(r.ranges()) + " from " + r.knownFrom();
        // A snapshot the record never marked: what it covers may be missing, said by knownFrom.
        r.flush();
        r = new AppliedRecord(dir);
        r.restart(200);
        final String unmarked = java.util.Arrays.deepToString(r.ranges()) + " from " + r.knownFrom();
        // No snapshot: the whole log is applied again.
        r = new AppliedRecord(dir);
        r.restart(-1);
        final String none = java.util.Arrays.deepToString(r.ranges()) + " " + new java.io.File(dir, AppliedRecord.FILE).length();
        check("the applied record keeps what the restored snapshot covers and drops what the replay applies again",
            live.equals("[[3, 3], [" + (probe | 1) + ", " + (probe | 2) + "], [" + (probe | 4) + ", " + (probe | 4) + "], [" + (probe | 9) + ", " +
                (probe | 9) + "]]") &&
            relaunched.equals("[[3, 3], [" + (probe | 1) + ", " + (probe | 2) + "], [" + (probe | 4) + ", " + (probe | 4) + "]] from 0") &&
            unmarked.equals("[[3, 3], [" + (probe | 1) + ", " + (probe | 2) + "]] from 200") && none.equals("[] 0"),
            live + " | " + relaunched + " | " + unmarked + " | " + none);
    }

    private static void phaseLogDrainedAtClose() throws java.io.IOException
    {
        final java.io.File dir = java.nio.file.Files.createTempDirectory("rig-phases").toFile();
        final PhaseLog pl = PhaseLog.open(dir);
        for (int i = 0; i < 3; i++)
        {
            pl.add("snapshot_capture", PhaseLog.BLOCKS_APPLY, BurstProbe.epochNanos(), 1_000_000L, "take " + i);
        }
        pl.close();
        final java.io.File f = new java.io.File(dir, PausesFile.NAME);
        final java.util.List<String> lines = java.nio.file.Files.readAllLines(f.toPath());
        f.delete();
        dir.delete();
        check("the phase log writes every span queued before its close, whole lines", lines.size() == 3 &&
            lines.stream().allMatch(l -> l.startsWith("{") && l.endsWith("}") && l.contains("\"source\":\"engine_phases\"")), lines.toString());
    }

    private static void causeSourcesConfig() throws java.io.IOException
    {
        final java.io.File dir = java.nio.file.Files.createTempDirectory("rig-config").toFile();
        final java.io.File f = new java.io.File(dir, "node.properties");
        final String base = "node=node-0\ndata_dir=" + dir + "\nraft_addr=127.0.0.1:1\nclient_addr=127.0.0.1:2\n" +
            "admin_addr=127.0.0.1:3\npeer.0=node-0,127.0.0.1:1,127.0.0.1:2\n";
        final StringBuilder seen = new StringBuilder();
        boolean ok = true;
        for (final String line : new String[] {"", "cause_sources=on\n", "cause_sources=off\n"})
        {
            java.nio.file.Files.writeString(f.toPath(), base + line);
            final boolean off = Node.readConfig(f).causeSourcesOff();
            seen.append(line.isEmpty() ? "(none)" : line.trim()).append(" -> ").append(off ? "off" : "on").append("; ");
            ok &= off == line.contains("off");
        }
        java.nio.file.Files.writeString(f.toPath(), base + "cause_sources=maybe\n");
        String err = null;
        try
        {
            Node.readConfig(f);
        }
        catch (final IllegalArgumentException e)
        {
            err = e.getMessage();
        }
        seen.append(err);
        f.delete();
        dir.delete();
        check("cause_sources in the node's config: on by default, off turns the duty-cycle sampler off, anything else refused",
            ok && err != null && err.contains("cause_sources = maybe: want on or off"), seen.toString());
    }

    public static void main(final String[] args) throws Exception
    {
        causeSourcesConfig();
        phaseLogDrainedAtClose();
        String err = null;
        try
        {
            RigAeron.checkCounters(counters(AeronCounters.CLUSTER_NODE_ROLE_TYPE_ID, AeronCounters.CLUSTER_COMMIT_POSITION_TYPE_ID), 0, 0);
        }
        catch (final IllegalStateException e)
        {
            err = e.getMessage();
        }
        check("a missing counter fails the start naming the Aeron version and the counter",
            err != null && err.startsWith("Aeron " + Admin.AERON_VERSION + ": no counter for election state (type " +
            AeronCounters.CLUSTER_ELECTION_STATE_TYPE_ID + ")") && err.contains("built against Aeron"), String.valueOf(err));
        err = null;
        try
        {
            RigAeron.checkCounters(counters(RigAeron.EXPECTED_COUNTERS), 0, 0);
        }
        catch (final IllegalStateException e)
        {
            err = e.getMessage();
        }
        check("every expected counter present: the start goes on", err == null, String.valueOf(err));

        final String[] phases = {"starting", "restoring", "joining", "replaying", "catching-up", "ready"};
        final StringBuilder seen = new StringBuilder();
        boolean ok = true;
        for (final ElectionState s : ElectionState.values())
        {
            final String want = switch (s)
            {
                case CLOSED -> "ready";
                case LEADER_REPLAY, FOLLOWER_REPLAY -> "replaying";
                case LEADER_INIT, LEADER_READY, FOLLOWER_CATCHUP_INIT, FOLLOWER_CATCHUP_AWAIT, FOLLOWER_CATCHUP, FOLLOWER_LOG_INIT,
                    FOLLOWER_LOG_AWAIT, FOLLOWER_READY -> "catching-up";
                default -> "joining";
            };
            final String got = phases[Admin.phase(ElectionState.get(s.code()), 0)];
            ok &= got.equals(want);
            seen.append(s).append('=').append(got).append(' ');
        }
        check("election states read by their code through Aeron's enum give the contract's phases", ok, seen.toString().trim());
        check("a candidate in CLOSED is not ready", phases[Admin.phase(ElectionState.CLOSED, 1)].equals("joining"),
            phases[Admin.phase(ElectionState.CLOSED, 1)]);

        check("a follower that left CLOSED to canvass is a candidate (the failover's detection)",
            Admin.role(0, ElectionState.CANVASS).equals("candidate") && Admin.role(0, ElectionState.NOMINATE).equals("candidate") &&
            Admin.role(1, ElectionState.CANDIDATE_BALLOT).equals("candidate") && Admin.role(0, ElectionState.FOLLOWER_BALLOT).equals("follower") &&
            Admin.role(0, ElectionState.CLOSED).equals("follower") && Admin.role(2, ElectionState.LEADER_REPLAY).equals("leader"),
            Admin.role(0, ElectionState.CANVASS) + " " + Admin.role(0, ElectionState.FOLLOWER_BALLOT) + " " + Admin.role(2, ElectionState.LEADER_REPLAY));

        long[] durs = {Changes.parseGoDuration("10s"), Changes.parseGoDuration("1m0s"), Changes.parseGoDuration("1.5s"),
            Changes.parseGoDuration("250ms"), Changes.parseGoDuration("0"), Changes.parseGoDuration("20µs")};
        check("GET /changes reads wait as a Go duration", java.util.Arrays.equals(durs,
            new long[] {10_000_000_000L, 60_000_000_000L, 1_500_000_000L, 250_000_000L, 0, 20_000}), java.util.Arrays.toString(durs));
        int refused = 0;
        for (final String bad : new String[] {"", "10", "-1s", "1x", "s"})
        {
            try
            {
                Changes.parseGoDuration(bad);
            }
            catch (final IllegalArgumentException e)
            {
                refused++;
            }
        }
        check("GET /changes refuses a wait that is no Go duration", refused == 5, refused + " of 5 refused");

        final Changes ch = new Changes();
        final java.time.Instant t0 = java.time.Instant.parse("2026-12-06T00:00:00Z");
        ch.check("follower", t0, () -> "{\"role\":\"follower\"}");
        ch.check("follower", t0.plusMillis(1), () -> "{}");
        ch.check("candidate", t0.plusMillis(2), () -> "{\"role\":\"candidate\"}");
        ch.check("leader", t0.plusMillis(3), () -> "{\"role\":\"leader\"}");
        final String all = ch.since(0, 0);
        final String after2 = ch.since(2, 0);
        final String stale = ch.since(99, 0);
        final long w0 = System.nanoTime();
        final String none = ch.since(3, 20_000_000L);
        final long waited = System.nanoTime() - w0;
        check("GET /changes: a version per change, each with the check before it, oldest first",
            all.startsWith("{\"version\":3,\"changes\":[{\"version\":1,\"status\":{\"role\":\"follower\"}},{\"version\":2,\"prev_check\":\"2026-12-06T00:00:00.001Z\"") &&
            all.endsWith("\"truncated\":false}") && after2.contains("\"version\":3,\"prev_check\":\"2026-12-06T00:00:00.002Z\"") &&
            !after2.contains("\"version\":2,") && stale.equals(all) && none.contains("\"changes\":[]") && waited >= 19_000_000L,
            all + " | " + after2 + " | " + none + " after " + waited / 1_000_000 + " ms");

        final NodeState ns = new NodeState();
        for (long id = 1; id <= 5; id++)
        {
            ns.positions.put(id, id * 100);
        }
        final int dropped = ns.forgetPositions(id -> id == 2 || id == 4);
        check("positions of requests no longer pending are forgotten", dropped == 3 && ns.positions.keySet().equals(java.util.Set.of(2L, 4L)),
            dropped + " dropped, kept " + ns.positions);

        final StringBuilder counts = new StringBuilder();
        Admin.snapshotCounts(counts, new NodeState.Snapshot(1216, 1, 2, 3, 4096, Introspection.UNSUPPORTED, 2, false, 0));
        final StringBuilder counted = new StringBuilder();
        Admin.snapshotCounts(counted, new NodeState.Snapshot(1216, 1, 2, 3, 4096, 0, 2, false, 0));
        check("a snapshot's uncounted orders and syncs are left out, not zero",
            !counts.toString().contains("orders") && !counts.toString().contains("syncs") && counted.toString().contains("\"orders\":0"),
            counts + " | " + counted);

        archiveWrites();
        failed += TransportSelfTest.run();
        failed += DutyCyclesSelfTest.run();
        bulkDefaults();
        runAuth();
        repeatedError();
        watchPace();
        endOfStream();
        markFiles();
        stopNeedsTheSecret();
        traps();
        appliedRecord();

        System.out.println(failed == 0 ? "ok" : failed + " check(s) failed");
        System.exit(failed == 0 ? 0 : 1);
    }
}
