import { formatBytes } from "../models/formatBytes.js";
import type { PullProgress } from "../core/ModelStore.js";

export interface ProgressPrinter {
  update(progress: PullProgress): void;
  /** Ends a bar left open (on success, or before an error message). */
  finish(): void;
}

/** Speed is averaged over this window: long enough to be steady, short enough to follow changes. */
const speedWindowMs = 5_000;
/** Without a terminal, a progress line at most this often (and at each tenth of the file). */
const plainLineEveryMs = 10_000;

/**
 * Shows pull progress: on a terminal, one live line per file with a bar, sizes, speed and time
 * left; elsewhere (logs, CI), plain lines at each tenth of the file or every 10 s.
 */
export function progressPrinter(out: NodeJS.WriteStream, now: () => number = Date.now): ProgressPrinter {
  const tty = out.isTTY === true;
  let status = "";
  let open = false;
  let samples: { at: number; completed: number }[] = [];
  let lastPlain = { at: 0, tenth: -1 };

  const finish = () => {
    if (open) out.write("\n");
    open = false;
  };

  return {
    finish,
    update(progress) {
      const changed = progress.status !== status;
      if (changed) {
        finish();
        status = progress.status;
        samples = [];
        lastPlain = { at: 0, tenth: -1 };
      }
      if (progress.total === undefined || progress.completed === undefined) {
        if (changed) out.write(`${progress.status}\n`);
        return;
      }
      if (!changed && progress.completed === samples.at(-1)?.completed) return; // nothing new to show
      const at = now();
      samples.push({ at, completed: progress.completed });
      while (samples.length > 2 && at - samples[0]!.at > speedWindowMs) samples.shift();
      const first = samples[0]!;
      const seconds = (at - first.at) / 1000;
      const speed = seconds > 0 ? (progress.completed - first.completed) / seconds : undefined;
      const fraction = progress.total > 0 ? progress.completed / progress.total : 1;
      const done = progress.completed >= progress.total;
      const sizes = `${formatBytes(progress.completed)}/${formatBytes(progress.total)}`;
      const rate = speed !== undefined && speed > 0 && !done ? `${formatBytes(speed)}/s` : "";
      const eta = speed !== undefined && speed > 0 && !done ? formatSeconds((progress.total - progress.completed) / speed) : "";

      if (tty) {
        const percent = `${Math.floor(fraction * 100)}%`.padStart(4);
        const tail = [sizes, rate, eta].filter(Boolean).join("  ");
        const width = Math.max(10, Math.min(40, (out.columns ?? 80) - progress.status.length - tail.length - 12));
        const filled = Math.round(fraction * width);
        out.write(`\r\x1b[2K${progress.status} ${percent} ▕${"█".repeat(filled)}${" ".repeat(width - filled)}▏ ${tail}`);
        open = true;
        if (done) finish();
        return;
      }
      const tenth = Math.floor(fraction * 10);
      if (tenth === lastPlain.tenth && at - lastPlain.at < plainLineEveryMs && !done) return;
      lastPlain = { at, tenth };
      out.write(`${progress.status}: ${Math.floor(fraction * 100)}% (${[sizes, rate, eta && `${eta} left`].filter(Boolean).join(", ")})\n`);
    },
  };
}

/** 75 → "1m15s", 3700 → "1h01m". */
function formatSeconds(total: number): string {
  const seconds = Math.ceil(total);
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, "0")}s`;
  return `${Math.floor(seconds / 3600)}h${String(Math.floor((seconds % 3600) / 60)).padStart(2, "0")}m`;
}
