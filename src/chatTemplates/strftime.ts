const days = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const months = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
const pad = (n: number, width = 2): string => String(n).padStart(width, "0");

/**
 * Python's datetime.strftime in the C locale (what transformers' strftime_now calls), on the date's
 * UTC fields so that a fixed instant renders the same on every machine. The codes the real templates
 * use are %Y %m %d %b %B (5 of llama.cpp's 71 templates print a date); the rest of C's common set is
 * here too, and an unknown code throws rather than print something Python would not.
 */
export function strftime(date: Date, format: string): string {
  return format.replace(/%(.)/g, (_, code: string) => {
    switch (code) {
      case "Y":
        return String(date.getUTCFullYear());
      case "y":
        return pad(date.getUTCFullYear() % 100);
      case "m":
        return pad(date.getUTCMonth() + 1);
      case "d":
        return pad(date.getUTCDate());
      case "e":
        return String(date.getUTCDate()).padStart(2, " ");
      case "b":
        return months[date.getUTCMonth()]!.slice(0, 3);
      case "B":
        return months[date.getUTCMonth()]!;
      case "a":
        return days[date.getUTCDay()]!.slice(0, 3);
      case "A":
        return days[date.getUTCDay()]!;
      case "H":
        return pad(date.getUTCHours());
      case "I":
        return pad(((date.getUTCHours() + 11) % 12) + 1);
      case "p":
        return date.getUTCHours() < 12 ? "AM" : "PM";
      case "M":
        return pad(date.getUTCMinutes());
      case "S":
        return pad(date.getUTCSeconds());
      case "j":
        return pad(
          Math.floor(
            (Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate()) - Date.UTC(date.getUTCFullYear(), 0, 1)) / 86_400_000,
          ) + 1,
          3,
        );
      case "%":
        return "%";
      default:
        throw new Error(`strftime_now: the format code %${code} is not supported`);
    }
  });
}
