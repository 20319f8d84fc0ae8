package dev.rig.aeron;

import io.aeron.archive.Archive;
import io.aeron.archive.ArchiveThreadingMode;
import io.aeron.archive.client.AeronArchive;
import io.aeron.cluster.ClusteredMediaDriver;
import io.aeron.cluster.ConsensusModule;
import io.aeron.cluster.service.ClusteredServiceContainer;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import java.io.File;
import java.io.FileReader;
import java.io.IOException;
import java.io.Reader;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.StandardOpenOption;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Properties;
import org.agrona.concurrent.NoOpLock;
import org.agrona.concurrent.ShutdownSignalBarrier;

/**
 * One cluster node in one JVM: the embedded media driver, archive and consensus module
 * (ClusteredMediaDriver), the clustered service, the docs/wire.md gateway on the client
 * address and the engine contract's admin API on the admin address.
 *
 * Usage: java [-Daeron.*=...] -cp ... dev.rig.aeron.Node --config node.properties
 *
 * The config file (rendered by rig's command driver from node.properties.tmpl) names the node,
 * its folders and addresses and its peers. Aeron's own settings come as -D system properties,
 * which Aeron's contexts read when they are built; /status reports the values the running
 * contexts hold, never the properties as given.
 */
public final class Node
{
    // UDP ports on the node's raft host, as offsets from the raft port; the raft port itself is
    // the consensus (member-facing) endpoint.
    static final int LOG_PORT_OFFSET = 10;
    static final int CATCHUP_PORT_OFFSET = 11;
    static final int ARCHIVE_PORT_OFFSET = 12;
    static final int INGRESS_PORT_OFFSET = 13;

    /** One voter as the config file lists it. */
    record Peer(String node, String raftAddr, String clientAddr)
    {
        String raftHost()
        {
            return host(raftAddr);
        }

        int raftPort()
        {
            return port(raftAddr);
        }
    }

    /** The node's config file. */
    record Config(String node, int memberId, File dataDir, String raftAddr, String clientAddr, String adminAddr, List<Peer> peers,
        File file)
    {
        String raftHost()
        {
            return host(raftAddr);
        }

        int raftPort()
        {
            return port(raftAddr);
        }

        String clientHost()
        {
            return host(clientAddr);
        }

        int clientPort()
        {
            return port(clientAddr);
        }

        String ingressEndpoints()
        {
            return Gateway.ingressEndpoints(peers, INGRESS_PORT_OFFSET);
        }

        String clusterMembers()
        {
            final StringBuilder sb = new StringBuilder();
            for (int i = 0; i < peers.size(); i++)
            {
                final String h = peers.get(i).raftHost();
                final int p = peers.get(i).raftPort();
                sb.append(i).append(',')
                    .append(h).append(':').append(p + INGRESS_PORT_OFFSET).append(',')
                    .append(h).append(':').append(p).append(',')
                    .append(h).append(':').append(p + LOG_PORT_OFFSET).append(',')
                    .append(h).append(':').append(p + CATCHUP_PORT_OFFSET).append(',')
                    .append(h).append(':').append(p + ARCHIVE_PORT_OFFSET).append('|');
            }
            sb.setLength(sb.length() - 1);
            return sb.toString();
        }
    }

    private Node()
    {
    }

    static String host(final String hostPort)
    {
        final int i = hostPort.lastIndexOf(':');
        if (i <= 0)
        {
            throw new IllegalArgumentException("address " + hostPort + ": want host:port");
        }
        return hostPort.substring(0, i);
    }

    static int port(final String hostPort)
    {
        final int i = hostPort.lastIndexOf(':');
        try
        {
            return Integer.parseInt(hostPort.substring(i + 1));
        }
        catch (final RuntimeException e)
        {
            throw new IllegalArgumentException("address " + hostPort + ": want host:port with a numeric port");
        }
    }

    static Config readConfig(final File f) throws IOException
    {
        final Properties p = new Properties();
        try (Reader r = new FileReader(f, StandardCharsets.UTF_8))
        {
            p.load(r);
        }
        final String node = need(p, f, "node");
        final List<Peer> peers = new ArrayList<>();
        for (int i = 0; p.getProperty("peer." + i) != null; i++)
        {
            final String[] parts = p.getProperty("peer." + i).split(",");
            if (parts.length != 3)
            {
                throw new IllegalArgumentException(f + ": peer." + i + " = " + p.getProperty("peer." + i) + ": want node,raft_addr,client_addr");
            }
            peers.add(new Peer(parts[0].trim(), parts[1].trim(), parts[2].trim()));
        }
        int member = -1;
        for (int i = 0; i < peers.size(); i++)
        {
            if (peers.get(i).node().equals(node))
            {
                member = i;
            }
        }
        if (member < 0)
        {
            throw new IllegalArgumentException(f + ": node " + node + " is not among peer.0 .. peer." + (peers.size() - 1));
        }
        File data = new File(need(p, f, "data_dir"));
        if (!data.isAbsolute())
        {
            data = new File(System.getProperty("user.dir"), data.getPath());
        }
        final Config c = new Config(node, member, data, need(p, f, "raft_addr"), need(p, f, "client_addr"), need(p, f, "admin_addr"),
            peers, f);
        host(c.raftAddr);
        port(c.clientAddr);
        port(c.adminAddr);
        return c;
    }

    private static String need(final Properties p, final File f, final String key)
    {
        final String v = p.getProperty(key);
        if (v == null || v.isBlank())
        {
            throw new IllegalArgumentException(f + ": " + key + " missing; want node, data_dir, raft_addr, client_addr, admin_addr, peer.N");
        }
        return v.trim();
    }

    /** The driver's folder: under /dev/shm when there is one (the term buffers are memory mapped), named for the data folder. */
    static String aeronDir(final Config c)
    {
        try
        {
            final byte[] h = MessageDigest.getInstance("SHA-256").digest(c.dataDir().getAbsolutePath().getBytes(StandardCharsets.UTF_8));
            final String name = "rig-aeron-" + c.node().replaceAll("[^A-Za-z0-9_.-]", "_") + "-" + HexFormat.of().formatHex(h, 0, 6);
            final File shm = new File("/dev/shm");
            return (shm.isDirectory() ? new File(shm, name) : new File(c.dataDir(), "aeron")).getAbsolutePath();
        }
        catch (final NoSuchAlgorithmException e)
        {
            throw new IllegalStateException(e);
        }
    }

    /** Defaults that behave on a small shared machine; a playbook sets the production ones (DEDICATED, busy-spin). */
    static void smallMachineDefaults()
    {
        System.setProperty("aeron.threading.mode", System.getProperty("aeron.threading.mode", ThreadingMode.SHARED.name()));
        System.setProperty("aeron.archive.threading.mode",
            System.getProperty("aeron.archive.threading.mode", ArchiveThreadingMode.SHARED.name()));
        System.setProperty("aeron.term.buffer.sparse.file", System.getProperty("aeron.term.buffer.sparse.file", "true"));
    }

    /**
     * Takes the data folder's lock for the life of the JVM. Aeron refuses to start on an archive or
     * cluster mark file a killed process left behind until its heartbeat is older than the driver
     * timeout (10 s); holding the lock proves no live process uses the folder, so such mark files
     * are stale and are removed. A second node on the same folder fails here instead.
     */
    static FileChannel lockDataDir(final File base) throws IOException
    {
        Files.createDirectories(base.toPath());
        final FileChannel ch = FileChannel.open(new File(base, "node.lock").toPath(), StandardOpenOption.CREATE, StandardOpenOption.WRITE);
        if (ch.tryLock() == null)
        {
            throw new IOException(base + " is in use by another process (node.lock is held)");
        }
        for (final String sub : new String[] {"archive", "cluster"})
        {
            final File[] marks = new File(base, sub).listFiles((d, name) -> name.contains("-mark") && name.endsWith(".dat"));
            if (marks != null)
            {
                for (final File m : marks)
                {
                    Log.info("removing " + m + ", left by a process that ended without closing it (we hold node.lock)");
                    Files.delete(m.toPath());
                }
            }
        }
        return ch;
    }

    public static void main(final String[] args) throws Exception
    {
        File configFile = null;
        for (int i = 0; i < args.length; i++)
        {
            if (args[i].equals("--config") && i + 1 < args.length)
            {
                configFile = new File(args[++i]);
            }
            else
            {
                System.err.println("dev.rig.aeron.Node: unknown argument " + args[i] + "; usage: --config FILE (Aeron settings as -D before the class)");
                System.exit(2);
            }
        }
        if (configFile == null)
        {
            System.err.println("dev.rig.aeron.Node: --config FILE is required");
            System.exit(2);
        }
        final Config cfg;
        try
        {
            cfg = readConfig(configFile);
        }
        catch (final IOException | IllegalArgumentException e)
        {
            System.err.println("dev.rig.aeron.Node: config: " + e.getMessage());
            System.exit(2);
            return;
        }
        final String token = System.getenv("RIG_ADMIN_TOKEN");
        smallMachineDefaults();
        final NodeState state = new NodeState();
        final String aeronDir = aeronDir(cfg);
        final File base = new File(cfg.dataDir(), "aeron-cluster");
        final String host = cfg.raftHost();
        Log.info("node " + cfg.node() + " member " + cfg.memberId() + " of " + cfg.peers().size() + ", data " + base + ", driver " + aeronDir +
            ", members " + cfg.clusterMembers());

        final Admin admin = new Admin(cfg, state, token);
        admin.bind(new InetSocketAddress(host(cfg.adminAddr()), port(cfg.adminAddr())));
        for (final String p : Admin.unreadProperties())
        {
            Log.warn("system property " + p + "=" + System.getProperty(p) + " is read by no Aeron " + Admin.AERON_VERSION +
                " configuration (Aeron would ignore it); /status reports it under ignored_properties");
        }

        final FileChannel lock = lockDataDir(base);
        final ShutdownSignalBarrier barrier = new ShutdownSignalBarrier();
        final MediaDriver.Context driverCtx = new MediaDriver.Context()
            .aeronDirectoryName(aeronDir)
            .dirDeleteOnStart(true)
            .dirDeleteOnShutdown(true)
            .terminationHook(barrier::signalAll);
        final Archive.Context archiveCtx = new Archive.Context()
            .aeronDirectoryName(aeronDir)
            .archiveDir(new File(base, "archive"))
            .controlChannel("aeron:udp?endpoint=" + host + ":" + (cfg.raftPort() + ARCHIVE_PORT_OFFSET))
            .archiveClientContext(new AeronArchive.Context().controlResponseChannel("aeron:udp?endpoint=" + host + ":0"))
            .localControlChannel("aeron:ipc?term-length=64k")
            .replicationChannel("aeron:udp?endpoint=" + host + ":0")
            .recordingEventsEnabled(false);
        final AeronArchive.Context archiveClient = new AeronArchive.Context()
            .lock(NoOpLock.INSTANCE)
            .controlRequestChannel(archiveCtx.localControlChannel())
            .controlRequestStreamId(archiveCtx.localControlStreamId())
            .controlResponseChannel(archiveCtx.localControlChannel())
            .aeronDirectoryName(aeronDir);
        final ConsensusModule.Context cmCtx = new ConsensusModule.Context()
            .clusterMemberId(cfg.memberId())
            .clusterMembers(cfg.clusterMembers())
            .clusterDir(new File(base, "cluster"))
            .archiveContext(archiveClient.clone())
            .serviceCount(1)
            .ingressChannel("aeron:udp")
            // A preload batch is ~1 MiB (docs/wire.md); a log message may be at most term-length / 8.
            .logChannel(System.getProperty("aeron.cluster.log.channel", "aeron:udp?term-length=16m"))
            .replicationChannel("aeron:udp?endpoint=" + host + ":0")
            .terminationHook(barrier::signalAll);
        final MatchingService service = new MatchingService(state);
        final ClusteredServiceContainer.Context serviceCtx = new ClusteredServiceContainer.Context()
            .aeronDirectoryName(aeronDir)
            .archiveContext(archiveClient.clone())
            .clusterDir(new File(base, "cluster"))
            .clusteredService(service)
            .serviceId(0)
            .errorHandler(e -> Log.error("clustered service", e))
            .terminationHook(barrier::signalAll);

        try (ClusteredMediaDriver driver = ClusteredMediaDriver.launch(driverCtx, archiveCtx, cmCtx);
            ClusteredServiceContainer container = ClusteredServiceContainer.launch(serviceCtx))
        {
            admin.start(driver, container);
            final Gateway gateway = new Gateway(cfg, state, aeronDir);
            admin.gateway(gateway);
            gateway.start();
            Log.info("node " + cfg.node() + " launched; admin on " + cfg.adminAddr());
            barrier.await();
            Log.info("node " + cfg.node() + " stopping");
            gateway.close();
            admin.close();
        }
        catch (final Throwable t)
        {
            Log.fatal("node " + cfg.node(), t);
        }
        finally
        {
            lock.close();
        }
        Log.info("node " + cfg.node() + " stopped");
        // On SIGTERM the barrier's shutdown hook holds the JVM until the barrier is closed.
        barrier.close();
        System.exit(0);
    }
}
