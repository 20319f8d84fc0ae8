package dev.rig.aeron;

import io.aeron.AeronCounters;
import org.agrona.concurrent.status.CountersReader;

/**
 * The Archive's own recorder counters (io.aeron.AeronCounters): total bytes written (type 106),
 * total time in writes (107) and the longest write (105). Every write of every recording counts
 * (the cluster log's and the snapshots'), and a write's time includes its force at file sync level
 * 1 or 2 (RecordingWriter.onBlock times the write and the force together). Aeron counts no number
 * of writes, so the forces themselves are counted only where the rig's disk model runs.
 */
final class ArchiveWrites
{
    /** One reading; a difference of two readings for a window (max is the archive's running maximum, not the window's). */
    record Sample(long bytes, long timeNs, long maxNs)
    {
        Sample since(final Sample start)
        {
            return new Sample(bytes - start.bytes, timeNs - start.timeNs, maxNs);
        }
    }

    private final CountersReader counters;
    private final int bytesId;
    private final int timeId;
    private final int maxId;

    private ArchiveWrites(final CountersReader counters, final int bytesId, final int timeId, final int maxId)
    {
        this.counters = counters;
        this.bytesId = bytesId;
        this.timeId = timeId;
        this.maxId = maxId;
    }

    /** The node's archive counters, or null when this Aeron has none of them (or the archive has not made them yet). */
    static ArchiveWrites find(final CountersReader cr)
    {
        final int[] ids = {-1, -1, -1};
        cr.forEach((counterId, typeId, keyBuffer, label) ->
        {
            if (typeId == AeronCounters.ARCHIVE_RECORDER_TOTAL_WRITE_BYTES_TYPE_ID)
            {
                ids[0] = counterId;
            }
            else if (typeId == AeronCounters.ARCHIVE_RECORDER_TOTAL_WRITE_TIME_TYPE_ID)
            {
                ids[1] = counterId;
            }
            else if (typeId == AeronCounters.ARCHIVE_RECORDER_MAX_WRITE_TIME_TYPE_ID)
            {
                ids[2] = counterId;
            }
        });
        return ids[0] < 0 || ids[1] < 0 || ids[2] < 0 ? null : new ArchiveWrites(cr, ids[0], ids[1], ids[2]);
    }

    Sample read()
    {
        return new Sample(counters.getCounterValue(bytesId), counters.getCounterValue(timeId), counters.getCounterValue(maxId));
    }

    /** A sample as the JSON field name (engine.EngineWrites), with its trailing comma as Json.field writes one. */
    static void json(final StringBuilder sb, final String name, final Sample s)
    {
        sb.append('"').append(name).append("\":{");
        Json.field(sb, "source", "aeron archive recorder counters (types 106, 107, 105)");
        Json.field(sb, "bytes", s.bytes());
        Json.field(sb, "time_ms", s.timeNs() / 1e6);
        Json.field(sb, "max_ms", s.maxNs() / 1e6);
        Json.close(sb);
        sb.append(',');
    }
}
