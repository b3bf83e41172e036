import { settings, type CommandName } from "./settings.js";
import { settingsFor } from "./loadConfig.js";

/** The options section of `--help`, printed from the settings schema so it can never drift. */
export function formatSettingsHelp(command: CommandName, width = 100): string {
  const lines: string[] = [];
  for (const key of settingsFor(command)) {
    const spec = settings[key];
    lines.push(`  --${spec.flag} <value>`);
    for (const line of wrap(spec.description, width - 6)) lines.push(`      ${line}`);
    lines.push(`      default: ${spec.default}   env: ${spec.env}`);
  }
  return lines.join("\n");
}

function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let current = "";
  for (const word of text.split(/\s+/)) {
    if (current && current.length + 1 + word.length > width) {
      lines.push(current);
      current = word;
    } else current = current ? `${current} ${word}` : word;
  }
  if (current) lines.push(current);
  return lines;
}
