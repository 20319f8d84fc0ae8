package dev.rig.aeron;

import io.aeron.AeronCounters;
import io.aeron.archive.Archive;
import io.aeron.archive.client.AeronArchive;
import io.aeron.cluster.ClusteredMediaDriver;
import io.aeron.cluster.ConsensusModule;
import io.aeron.cluster.service.ClusterCounters;
import io.aeron.cluster.service.ClusteredService;
import io.aeron.cluster.service.ClusteredServiceContainer;
import io.aeron.driver.MediaDriver;
import io.aeron.security.CredentialsSupplier;
import java.io.File;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.channels.FileChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.function.Consumer;
import java.util.function.Supplier;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.NoOpLock;
import org.agrona.concurrent.ShutdownSignalBarrier;
import org.agrona.concurrent.status.CountersReader;

/**
 * Runs a user's ClusteredService as one node of a rig cluster, in one JVM: the embedded media
 * driver, archive and consensus module (ClusteredMediaDriver), the service container with the user's
 * service inside the harness's decorator, the docs/wire.md gateway on the client address (through the
 * user's {@link RigCodec}) and the engine contract's admin API on the admin address.
 *
 * <pre>
 * public static void main(String[] args) {
 *     RigAeron.node(args).service(new MyService()).codec(new MyCodec()).run();
 * }
 * </pre>
 *
 * Usage: java [-Daeron.*=...] -jar my-service.jar --config node.properties (start-node.sh).
 *
 * Aeron's settings: the user's own contexts ({@link #mediaDriver}, {@link #archive},
 * {@link #consensusModule}, {@link #container}) or the harness's, built from the -D system
 * properties, and then {@link #customize} on all of them, so production tuning applies as it is.
 * The harness then sets only what ties the node to rig's cluster (see {@link Contexts}).
 * /status reports the values the contexts hold, never the properties as given.
 */
public final class RigAeron
{
    /**
     * The node's Aeron contexts, as {@link #customize} sees them. The harness sets, after the
     * customizer: the driver's folder (aeronDirectoryName, deleted on start and shutdown), the
     * archive, cluster and mark-file folders under the data folder, the cluster members and this
     * member's id, the archive's control and replication channels, the ingress channel ("aeron:udp",
     * endpoints per member), the archive's and the consensus module's authenticators and every
     * archive client's credentials (the run's, {@link RunAuth}), the clustered service (the user's,
     * decorated), service id 0, service count 1 and the termination hooks. Everything else is the user's.
     */
    public record Contexts(MediaDriver.Context mediaDriver, Archive.Context archive, ConsensusModule.Context consensusModule,
        ClusteredServiceContainer.Context container)
    {
    }

    /** The Aeron counters the harness reads, by Aeron's own type ids (io.aeron.AeronCounters). */
    static final int[] EXPECTED_COUNTERS = {
        AeronCounters.CLUSTER_NODE_ROLE_TYPE_ID,
        AeronCounters.CLUSTER_COMMIT_POSITION_TYPE_ID,
        AeronCounters.CLUSTER_ELECTION_STATE_TYPE_ID,
        AeronCounters.CLUSTER_SNAPSHOT_COUNTER_TYPE_ID,
        AeronCounters.CLUSTER_CONTROL_TOGGLE_TYPE_ID,
    };
    static final String[] EXPECTED_COUNTER_NAMES = {"node role", "commit position", "election state", "snapshot count", "control toggle"};

    private final String[] args;
    private ClusteredService service;
    private RigCodec codec;
    private Introspection introspection = new Introspection()
    {
    };
    private MediaDriver.Context mediaDriver;
    private Archive.Context archive;
    private ConsensusModule.Context consensusModule;
    private ClusteredServiceContainer.Context container;
    private Consumer<Contexts> customizer = c -> { };

    private RigAeron(final String[] args)
    {
        this.args = args.clone();
    }

    /** A node for the command line rig's command driver gave the JVM (--config FILE). */
    public static RigAeron node(final String[] args)
    {
        return new RigAeron(args);
    }

    /** The user's service, run unchanged inside the harness's decorator. */
    public RigAeron service(final ClusteredService service)
    {
        this.service = Objects.requireNonNull(service, "service");
        return this;
    }

    /** rig's requests to the service's ingress and its egress to rig's replies. */
    public RigAeron codec(final RigCodec codec)
    {
        this.codec = Objects.requireNonNull(codec, "codec");
        return this;
    }

    /** Optional: the service's state hash, resting orders, held order ids (see {@link Introspection}). */
    public RigAeron introspection(final Introspection introspection)
    {
        this.introspection = Objects.requireNonNull(introspection, "introspection");
        return this;
    }

    /** The user's media driver context (default: a new one, from the system properties). */
    public RigAeron mediaDriver(final MediaDriver.Context ctx)
    {
        this.mediaDriver = ctx;
        return this;
    }

    /** The user's archive context. */
    public RigAeron archive(final Archive.Context ctx)
    {
        this.archive = ctx;
        return this;
    }

    /** The user's consensus module context. */
    public RigAeron consensusModule(final ConsensusModule.Context ctx)
    {
        this.consensusModule = ctx;
        return this;
    }

    /** The user's service container context. */
    public RigAeron container(final ClusteredServiceContainer.Context ctx)
    {
        this.container = ctx;
        return this;
    }

    /** Changes any of the node's contexts before the harness ties them to rig's cluster. */
    public RigAeron customize(final Consumer<Contexts> customizer)
    {
        this.customizer = Objects.requireNonNull(customizer, "customizer");
        return this;
    }

    /** Launches the node and blocks until it is told to stop; then ends the JVM. Exits 2 on a bad command line. */
    public void run()
    {
        try
        {
            launch();
        }
        catch (final Throwable t)
        {
            Log.fatal("node", t);
        }
    }

    private static void usage(final String msg)
    {
        System.err.println("rig-aeron: " + msg + "; usage: --config FILE, or --burst REQUEST (Aeron settings as -D before the class or -jar)");
        System.exit(2);
    }

    private void launch() throws Exception
    {
        if (service == null || codec == null)
        {
            throw new IllegalStateException("RigAeron needs .service(...) and .codec(...) before run()");
        }
        File configFile = null;
        for (int i = 0; i < args.length; i++)
        {
            if (args[i].equals("--config") && i + 1 < args.length)
            {
                configFile = new File(args[++i]);
            }
            else if (args[i].equals("--burst") && i + 1 < args.length)
            {
                BurstClient.main(codec, new File(args[++i]));
                return;
            }
            else if (args[i].equals("--gateway-bench") && i + 1 < args.length)
            {
                GatewayBench.main(codec, new File(args[++i]));
                return;
            }
            else
            {
                usage("unknown argument " + args[i]);
            }
        }
        if (configFile == null)
        {
            usage("--config FILE is required");
        }
        final Node.Config cfg;
        final long dutyIntervalNs;
        try
        {
            cfg = Node.readConfig(configFile);
            dutyIntervalNs = DutyCycles.intervalNs();
        }
        catch (final IOException | IllegalArgumentException e)
        {
            System.err.println("rig-aeron: config: " + e.getMessage());
            System.exit(2);
            return;
        }
        final String token = System.getenv("RIG_ADMIN_TOKEN");
        final RunAuth auth = RunAuth.fromEnvironment();
        if (auth == null)
        {
            Log.warn(RunAuth.ENV + " is not set: the archive control channel and the cluster ingress accept any client that reaches " +
                "this node's address (docs/security.md)");
        }
        Node.smallMachineDefaults();
        final NodeState state = new NodeState();
        // cause_sources=off prices the always-on sources: no phases, no duty cycles (below).
        state.phases = cfg.causeSourcesOff() ? null : PhaseLog.open(configFile.getAbsoluteFile().getParentFile());
        final String aeronDir = Node.aeronDir(cfg);
        final File base = new File(cfg.dataDir(), "aeron-cluster");
        final String host = cfg.raftHost();
        Log.info("node " + cfg.node() + " member " + cfg.memberId() + " of " + cfg.peers().size() + ", Aeron " + Admin.AERON_VERSION +
            ", service " + service.getClass().getName() + ", data " + base + ", driver " + aeronDir + ", members " + cfg.clusterMembers());

        final ShutdownSignalBarrier barrier = new ShutdownSignalBarrier();
        final Contexts ctx = new Contexts(
            mediaDriver != null ? mediaDriver : new MediaDriver.Context(),
            archive != null ? archive : new Archive.Context(),
            consensusModule != null ? consensusModule : new ConsensusModule.Context()
                // A preload batch is ~1 MiB (docs/wire.md); a log message may be at most term-length / 8.
                .logChannel(System.getProperty(ConsensusModule.Configuration.LOG_CHANNEL_PROP_NAME, "aeron:udp?term-length=16m")),
            container != null ? container : new ClusteredServiceContainer.Context());
        customizer.accept(ctx);
        wire(ctx, cfg, aeronDir, base, host, barrier, new RigService(service, codec, introspection, state, cfg.dataDir()), auth);
        ChangeSignal.install(ctx.consensusModule(), state::changed);
        // The duty-cycle reads ride on the consensus module's cycles (DutyCycles.Host), round the idle
        // strategy it would use (a customizer's, else Aeron's default, as ChangeSignal finds it).
        final DutyCycles.Host dutyHost = cfg.causeSourcesOff() ? null : new DutyCycles.Host();
        if (dutyHost != null)
        {
            final Supplier<IdleStrategy> given = Compat.idleStrategySupplier(ctx.consensusModule());
            ctx.consensusModule().idleStrategySupplier(
                dutyHost.wrap(given != null ? given : ClusteredServiceContainer.Configuration.idleStrategySupplier(null)));
        }

        // The admin API answers from here on ("starting"); config holds the contexts' settings once launch concluded them.
        final Admin admin = new Admin(cfg, state, token, introspection, barrier::signalAll);
        admin.bind(new InetSocketAddress(Node.host(cfg.adminAddr()), Node.port(cfg.adminAddr())));
        for (final String p : Admin.unreadProperties())
        {
            Log.warn("system property " + p + "=" + System.getProperty(p) + " is read by no Aeron " + Admin.AERON_VERSION +
                " configuration (Aeron would ignore it); /status reports it under ignored_properties");
        }

        final FileChannel lock = Node.lockDataDir(base);
        try
        {
            final ClusteredMediaDriver driver = ClusteredMediaDriver.launch(ctx.mediaDriver(), ctx.archive(), ctx.consensusModule());
            final ClusteredServiceContainer container = ClusteredServiceContainer.launch(ctx.container());
            // The contexts are concluded from here on: the admin API reads them only now.
            admin.start(driver, container);
            checkCounters(container.context().aeron().countersReader(), container.context().clusterId(), 10_000_000_000L);
            // Beside the config file: the node folder, which the run collects (rundir.PausesFile).
            final File pauses = new File(cfg.file().getAbsoluteFile().getParentFile(), PausesFile.NAME);
            DutyCycles duty = null;
            try
            {
                if (!cfg.causeSourcesOff())
                {
                    duty = DutyCycles.open(container.context().aeron().countersReader(), pauses, dutyIntervalNs);
                    if (dutyHost != null && dutyHost.hosting())
                    {
                        dutyHost.attach(duty);
                    }
                    else
                    {
                        duty.startThread();
                    }
                }
            }
            catch (final IOException e)
            {
                // an observer, not the engine: the node runs on, and the run has no duty-cycle spans
                Log.warn("duty-cycle sampler not started: " + pauses + ": " + e.getMessage());
            }
            final SnapshotHasher hasher = new SnapshotHasher(container.context().aeron(), container.context().snapshotChannel(),
                container.context().snapshotStreamId(), state, !Admin.overrides(introspection, "stateHash"));
            hasher.start();
            state.hashing = true;
            final BurstProbe probe = BurstProbe.wanted() ? BurstProbe.start(container.context().aeron(),
                host + ":" + (cfg.raftPort() + Node.INGRESS_PORT_OFFSET), ctx.consensusModule().ingressStreamId()) : null;
            final Gateway gateway = new Gateway(cfg, state, aeronDir, codec, service.getClass().getName(),
                RunAuth.ingressCredentials(auth));
            admin.gateway(gateway);
            gateway.start();
            Log.info("node " + cfg.node() + " launched; admin on " + cfg.adminAddr());
            barrier.await();
            Log.info("node " + cfg.node() + " stopping");
            gateway.close();
            if (probe != null)
            {
                probe.close();
            }
            hasher.close();
            if (duty != null)
            {
                duty.close();
            }
            admin.close();
            GracefulStop.run(driver, container, service.getClass().getName(), base);
            if (state.phases != null)
            {
                state.phases.close(); // after the stop: a take it waited for hands its spans over first
            }
        }
        finally
        {
            lock.close();
        }
        Log.info("node " + cfg.node() + " stopped");
        // On SIGTERM the barrier's shutdown hook holds the JVM until the barrier is closed.
        Compat.closeIfCloseable(barrier);
        System.exit(0);
    }

    /**
     * Ties the contexts to rig's cluster: folders, members, channels, the decorated service, hooks,
     * and who may use the archive control channel and the ingress (auth: the run's credentials, see
     * {@link RunAuth}; null: anyone). Every archive client presents the run's credentials: the
     * consensus module's and the container's (over IPC) and the archive's own replication client,
     * which copies a peer's log through the peer's control channel.
     */
    private static void wire(final Contexts c, final Node.Config cfg, final String aeronDir, final File base, final String host,
        final ShutdownSignalBarrier barrier, final RigService decorated, final RunAuth auth)
    {
        final CredentialsSupplier archiveCredentials = RunAuth.archiveCredentials(auth);
        c.mediaDriver()
            .aeronDirectoryName(aeronDir)
            .dirDeleteOnStart(true)
            .dirDeleteOnShutdown(true)
            .terminationHook(barrier::signalAll);
        c.archive()
            .aeronDirectoryName(aeronDir)
            .archiveDir(new File(base, "archive"))
            .controlChannel("aeron:udp?endpoint=" + host + ":" + (cfg.raftPort() + Node.ARCHIVE_PORT_OFFSET))
            .archiveClientContext(new AeronArchive.Context().controlResponseChannel("aeron:udp?endpoint=" + host + ":0")
                .credentialsSupplier(archiveCredentials))
            .localControlChannel("aeron:ipc?term-length=64k")
            .replicationChannel("aeron:udp?endpoint=" + host + ":0")
            .recordingEventsEnabled(false);
        final AeronArchive.Context archiveClient = new AeronArchive.Context()
            .credentialsSupplier(archiveCredentials)
            .lock(NoOpLock.INSTANCE)
            .controlRequestChannel(c.archive().localControlChannel())
            .controlRequestStreamId(c.archive().localControlStreamId())
            .controlResponseChannel(c.archive().localControlChannel())
            .aeronDirectoryName(aeronDir);
        c.consensusModule()
            .aeronDirectoryName(aeronDir)
            .clusterMemberId(cfg.memberId())
            .clusterMembers(cfg.clusterMembers())
            .clusterDir(new File(base, "cluster"))
            .archiveContext(archiveClient.clone())
            .serviceCount(1)
            .ingressChannel("aeron:udp")
            .replicationChannel("aeron:udp?endpoint=" + host + ":0")
            .terminationHook(barrier::signalAll);
        if (auth != null)
        {
            c.archive().authenticatorSupplier(auth.archiveAuthenticator());
            c.consensusModule().authenticatorSupplier(auth.ingressAuthenticator());
        }
        c.container()
            .aeronDirectoryName(aeronDir)
            .archiveContext(archiveClient.clone())
            .clusterDir(new File(base, "cluster"))
            .clusteredService(decorated)
            .serviceId(0)
            .errorHandler(e -> Log.error("clustered service", e))
            .terminationHook(barrier::signalAll);
    }

    /**
     * Fails the node, naming the Aeron version, when a counter the admin API reads is missing: on
     * another Aeron release the phases and roles would otherwise be silently wrong.
     */
    static void checkCounters(final CountersReader cr, final int clusterId, final long waitNs) throws InterruptedException
    {
        final long deadline = System.nanoTime() + waitNs;
        while (true)
        {
            final List<String> missing = new ArrayList<>();
            for (int i = 0; i < EXPECTED_COUNTERS.length; i++)
            {
                if (ClusterCounters.find(cr, EXPECTED_COUNTERS[i], clusterId) < 0)
                {
                    missing.add(EXPECTED_COUNTER_NAMES[i] + " (type " + EXPECTED_COUNTERS[i] + ")");
                }
            }
            if (missing.isEmpty())
            {
                return;
            }
            if (System.nanoTime() > deadline)
            {
                throw new IllegalStateException("Aeron " + Admin.AERON_VERSION + ": no counter for " + String.join(", ", missing) + " in cluster " + clusterId + " within " + waitNs / 1_000_000 + " ms of launch; rig-aeron " +
                    "reads these through io.aeron.AeronCounters and was built against Aeron " + BUILT_AGAINST);
            }
            Thread.sleep(50);
        }
    }

    /** The Aeron version this harness was compiled against (a compile-time constant, inlined). */
    static final String BUILT_AGAINST = io.aeron.AeronVersion.VERSION;
}
