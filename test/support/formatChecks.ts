// Independent checks of the string formats the grammars support (RFC 3339 dates and times,
// RFC 4122 UUIDs, RFC 5321 mailboxes, RFC 1123 host names, dotted quads), not derived from the
// grammar rules or patterns they check.

export const FORMATS: Record<string, (text: string) => boolean> = {
  date: isDate,
  time: isTime,
  "date-time": (text) => {
    const [date, time, ...rest] = text.split("T");
    return rest.length === 0 && date !== undefined && time !== undefined && isDate(date) && isTime(time);
  },
  uuid: (text) => /^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$/i.test(text),
  email: isEmail,
  hostname: isHostname,
  ipv4: (text) => {
    const parts = text.split(".");
    return parts.length === 4 && parts.every((part) => /^(0|[1-9][0-9]{0,2})$/.test(part) && Number(part) <= 255);
  },
};

function isDate(text: string): boolean {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
  if (!match) return false;
  const [year, month, day] = match.slice(1).map(Number) as [number, number, number];
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

function isTime(text: string): boolean {
  const match = /^(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:Z|[+-](\d{2}):(\d{2}))$/.exec(text);
  if (!match) return false;
  const [hour, minute, second, offsetHour, offsetMinute] = match.slice(1).map((group) => Number(group ?? 0)) as [
    number,
    number,
    number,
    number,
    number,
  ];
  return hour < 24 && minute < 60 && second < 60 && offsetHour < 24 && offsetMinute < 60;
}

function isHostname(text: string): boolean {
  return text.length <= 253 && text.split(".").every((label) => /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/i.test(label));
}

/** RFC 5321 Mailbox with a Dot-string local part, within its length limits. */
function isEmail(text: string): boolean {
  const at = text.lastIndexOf("@");
  const local = text.slice(0, at);
  const domain = text.slice(at + 1);
  const atom = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+";
  return local.length <= 64 && new RegExp(`^${atom}(\\.${atom})*$`).test(local) && domain.length <= 255 && isHostname(domain);
}
