package dev.rig.aeron;

import io.aeron.archive.ArchiveThreadingMode;
import io.aeron.driver.ThreadingMode;
import java.io.File;
import java.io.FileReader;
import java.io.IOException;
import java.io.Reader;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Properties;

/**
 * A node's config file (rendered by rig's command driver from node.properties.tmpl: the node, its
 * folders and addresses, its peers), the ports Aeron's endpoints use, and the data folder's lock.
 * {@link RigAeron} launches the node.
 */
final class Node
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
        File file, boolean causeSourcesOff)
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
        // cause_sources=off: the run prices the always-on cause sources, this node's duty-cycle
        // sampler among them (playbook cause_sources).
        final String causes = p.getProperty("cause_sources", "on").trim();
        if (!causes.equals("on") && !causes.equals("off"))
        {
            throw new IllegalArgumentException(f + ": cause_sources = " + causes + ": want on or off");
        }
        final Config c = new Config(node, member, data, need(p, f, "raft_addr"), need(p, f, "client_addr"), need(p, f, "admin_addr"),
            peers, f, causes.equals("off"));
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
        // A preload sends ~1 MiB batches (docs/wire.md) through ingress and the log. With Aeron's
        // 128 KiB receiver window (and socket buffers) a sender stalls every 128 KiB for the
        // receiver's next status message; a window of BULK_WINDOW, capped at what the kernel allows
        // a socket (net.core.rmem_max, wmem_max), let a 1M-order preload run 1.6x as fast
        // (docs/engines.md, "Preload").
        final long rcv = Math.min(BULK_WINDOW, sysctl("/proc/sys/net/core/rmem_max", BULK_WINDOW));
        final long snd = Math.min(BULK_WINDOW, sysctl("/proc/sys/net/core/wmem_max", BULK_WINDOW));
        System.setProperty("aeron.socket.so_rcvbuf", System.getProperty("aeron.socket.so_rcvbuf", Long.toString(rcv)));
        System.setProperty("aeron.socket.so_sndbuf", System.getProperty("aeron.socket.so_sndbuf", Long.toString(snd)));
        System.setProperty("aeron.rcv.initial.window.length",
            System.getProperty("aeron.rcv.initial.window.length", System.getProperty("aeron.socket.so_rcvbuf")));
    }

    /** The receiver window and socket buffers the harness asks for unless a -D says otherwise. */
    static final long BULK_WINDOW = 4L << 20;

    /** A number from a /proc/sys file, or dflt when it cannot be read. */
    static long sysctl(final String path, final long dflt)
    {
        try
        {
            // A line, not Files.readString: procfs reports these files' size wrongly, and readString trusts it.
            try (java.io.BufferedReader r = Files.newBufferedReader(Path.of(path)))
            {
                return Long.parseLong(r.readLine().trim());
            }
        }
        catch (final IOException | RuntimeException e)
        {
            return dflt;
        }
    }

    /**
     * Takes the data folder's lock for the life of the JVM. Aeron refuses to start on an archive or
     * cluster mark file a killed process left behind until its heartbeat is older than the driver
     * timeout (10 s); holding the lock proves no live process uses the folder, so such mark files
     * are stale and are removed. After a graceful stop (GracefulStop's file is there) every mark
     * file was closed, which Aeron accepts, and they are kept. A second node on the same folder
     * fails here instead.
     */
    static FileChannel lockDataDir(final File base) throws IOException
    {
        Files.createDirectories(base.toPath());
        final FileChannel ch = FileChannel.open(new File(base, "node.lock").toPath(), StandardOpenOption.CREATE, StandardOpenOption.WRITE);
        if (ch.tryLock() == null)
        {
            throw new IOException(base + " is in use by another process (node.lock is held)");
        }
        if (Files.deleteIfExists(new File(base, GracefulStop.CLEAN_STOP_FILE).toPath()))
        {
            return ch;
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
}
