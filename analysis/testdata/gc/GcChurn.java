// GcChurn allocates short-lived arrays in a small heap so the JVM collects many times in a
// second: a real GC log for results/gclog_test.go. Run: java -Xmx24m -Xlog:gc*:file=gc.log:time,uptime,level,tags GcChurn.java
public class GcChurn {
    public static void main(String[] args) {
        Object[] keep = new Object[64];
        long sum = 0;
        for (int i = 0; i < 60_000; i++) {
            byte[] b = new byte[1024 + (i % 4096)];
            b[0] = (byte) i;
            sum += b[0];
            keep[i % keep.length] = b;
        }
        System.out.println("churned " + sum);
    }
}
