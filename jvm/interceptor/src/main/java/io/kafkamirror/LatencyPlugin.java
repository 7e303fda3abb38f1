package io.kafkamirror;

import java.util.Collections;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import org.apache.spark.SparkContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerExecutorRemoved;

/**
 * Brings the replication latency executors record ({@link LatencyRegistry}) to the driver
 * ({@code spark.plugins=io.kafkamirror.LatencyPlugin}, set by kafka.mirror when metrics are on).
 * Each executor in a JVM other than the driver's sends its cumulative counts every {@link
 * #INTERVAL_MS} ms (and when it stops); the driver keeps the latest per executor, and adds the
 * last one of a removed executor to one sum of all removed executors (what the driver keeps does
 * not grow with each executor a long-running cluster replaced). In local mode
 * the producer runs in the driver JVM: the executor plugin sends nothing. Executors send the
 * {@link CopiedRanges} of real-time mode the same way (drained: each range is sent once).
 */
public final class LatencyPlugin implements SparkPlugin {

  static final long INTERVAL_MS = 2_000;

  private static volatile boolean driverHere;

  @Override
  public DriverPlugin driverPlugin() {
    return new Driver();
  }

  @Override
  public ExecutorPlugin executorPlugin() {
    return new Executor();
  }

  /** Keeps each executor's latest snapshot. */
  public static final class Driver implements DriverPlugin {
    @Override
    public Map<String, String> init(SparkContext sc, PluginContext context) {
      driverHere = true;
      sc.addSparkListener(new Retirements());
      return Collections.emptyMap();
    }

    @Override
    public Object receive(Object message) {
      if (message instanceof LatencyRegistry.Snapshot snapshot) {
        LatencyRegistry.remote(snapshot.executor, snapshot.counts);
      } else if (message instanceof CopiedRanges.Batch batch) {
        CopiedRanges.remote(batch.runs);
      }
      return null;
    }

    @Override
    public void shutdown() {
      driverHere = false;
    }
  }

  /** A removed executor's last counts join the removed executors' sum on the driver. */
  static final class Retirements extends SparkListener {
    @Override
    public void onExecutorRemoved(SparkListenerExecutorRemoved removed) {
      LatencyRegistry.retire(removed.executorId());
    }
  }

  /** Sends this JVM's counts to the driver, unless this JVM is the driver's. */
  public static final class Executor implements ExecutorPlugin {
    private PluginContext context;
    private ScheduledExecutorService timer;

    @Override
    public void init(PluginContext context, Map<String, String> extraConf) {
      if (driverHere || "driver".equals(context.executorID())) {
        return;
      }
      this.context = context;
      timer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread thread = new Thread(r, "kafka-mirror-latency-plugin");
        thread.setDaemon(true);
        return thread;
      });
      timer.scheduleWithFixedDelay(this::send, INTERVAL_MS, INTERVAL_MS, TimeUnit.MILLISECONDS);
    }

    void send() {
      try {
        if (!LatencyRegistry.isEmpty()) {
          context.send(new LatencyRegistry.Snapshot(context.executorID(),
              LatencyRegistry.snapshot()));
        }
      } catch (Exception e) {
        // the next round sends the counts again (they are cumulative)
      }
      try {
        java.util.HashMap<String, String> runs = CopiedRanges.drainAll();
        if (!runs.isEmpty()) {
          context.send(new CopiedRanges.Batch(runs));
        }
      } catch (Exception e) {
        // ranges lost on the way leave offset translation conservative, never wrong
      }
    }

    @Override
    public void shutdown() {
      if (timer != null) {
        timer.shutdownNow();
        send();
      }
    }
  }
}
