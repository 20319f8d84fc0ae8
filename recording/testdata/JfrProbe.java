import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.locks.LockSupport;

// The JFR reader's test program (recording/jfr_test.go): each loop writes and forces a block of
// an archive-like segment file, parks 30 ms, asks for a full GC, waits 25 ms on a monitor and
// spins 100 ms; it prints "loop N" after each. Args: data folder, loops, ms to sleep at the end.
public class JfrProbe {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        Path dir = Paths.get(args[0], "archive");
        Files.createDirectories(dir);
        int loops = Integer.parseInt(args[1]);
        long sleepMs = args.length > 2 ? Long.parseLong(args[2]) : 0;
        try (FileChannel ch = FileChannel.open(dir.resolve("0-0.rec"), StandardOpenOption.CREATE, StandardOpenOption.WRITE)) {
            for (int i = 0; i < loops; i++) {
                ch.write(ByteBuffer.wrap(new byte[4096]));
                ch.force(true);
                LockSupport.parkNanos(30_000_000L);
                System.gc();
                Object m = new Object();
                synchronized (m) {
                    m.wait(25);
                }
                // Spins for 100 ms, five of JFR's 20 ms sampling periods, however fast the JIT
                // makes the loop: the reader must find execution samples here.
                long x = 0;
                final long until = System.nanoTime() + 100_000_000L;
                while (System.nanoTime() < until) {
                    for (long j = 0; j < 100_000L; j++) {
                        x += j ^ i;
                    }
                }
                sink = x;
                System.out.println("loop " + i);
                System.out.flush();
            }
        }
        Thread.sleep(sleepMs);
    }
}
