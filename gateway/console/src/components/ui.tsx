import { useState, type ReactNode } from 'react';
import { ApiError } from '../api/client';

/** Shows the API's own message (and its code) for a failed call. */
export function ErrorBox({ error, title }: { error: unknown; title?: string }) {
  if (!error) return null;
  const message = error instanceof Error ? error.message : String(error);
  const code = error instanceof ApiError ? error.code : undefined;
  return (
    <div className="error" role="alert">
      <strong>{title ?? 'Something went wrong'}</strong>
      <p>
        {message}
        {code ? <span className="muted"> ({code})</span> : null}
      </p>
    </div>
  );
}

export function Empty({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="empty">
      <p className="empty-title">{title}</p>
      {children ? <div className="muted">{children}</div> : null}
    </div>
  );
}

export function Loading({ label = 'Loading…' }: { label?: string }) {
  return (
    <p className="muted" role="status" aria-live="polite">
      {label}
    </p>
  );
}

export function PageHeader({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <header className="page-header">
      <h1>{title}</h1>
      {children ? <div className="actions">{children}</div> : null}
    </header>
  );
}

/** Copies `value`; says so for screen readers too. */
export function CopyButton({ value, label = 'Copy' }: { value: string; label?: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <button
      type="button"
      className="small"
      aria-label={`${label}: ${value.length > 40 ? value.slice(0, 40) + '…' : value}`}
      onClick={async () => {
        try {
          await navigator.clipboard.writeText(value);
        } catch {
          // Clipboard refused (insecure origin): select-and-copy fallback.
          const t = document.createElement('textarea');
          t.value = value;
          document.body.appendChild(t);
          t.select();
          document.execCommand('copy');
          t.remove();
        }
        setCopied(true);
        setTimeout(() => setCopied(false), 1500);
      }}
    >
      {copied ? 'Copied' : label}
      <span className="sr-only" aria-live="polite">{copied ? 'Copied' : ''}</span>
    </button>
  );
}

/**
 * Mail HTML is untrusted: rendered with `sandbox` (no scripts, no same-origin, no forms, no top
 * navigation) from `srcdoc`, so it can neither run code nor read the console's cookie or DOM.
 */
export function MailFrame({ html, title }: { html: string; title: string }) {
  return <iframe className="mail-frame" sandbox="" srcDoc={html} title={title} referrerPolicy="no-referrer" />;
}

export function Pager({ page, hasNext, onPage }: { page: number; hasNext: boolean; onPage: (p: number) => void }) {
  return (
    <nav className="pager" aria-label="Pages">
      <button type="button" disabled={page <= 1} onClick={() => onPage(page - 1)}>
        Previous
      </button>
      <span>Page {page}</span>
      <button type="button" disabled={!hasNext} onClick={() => onPage(page + 1)}>
        Next
      </button>
    </nav>
  );
}

export function Status({ value }: { value: string }) {
  return <span className={`badge badge-${value.toLowerCase().replace(/[^a-z_]/g, '')}`}>{value}</span>;
}

export function formatDate(value: string | number | null | undefined): string {
  if (value === null || value === undefined || value === '') return '—';
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? String(value) : d.toLocaleString();
}
