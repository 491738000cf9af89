import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { Link, useNavigate } from 'react-router';
import { api, unwrap } from '../../api/client';
import { Empty, ErrorBox, formatDate, Loading, PageHeader } from '../../components/ui';

/** Contact books with their counts; a new book opens at once so contacts can be imported into it. */
export default function Contacts() {
  const qc = useQueryClient();
  const navigate = useNavigate();
  const [name, setName] = useState('');
  const books = useQuery({ queryKey: ['contact-books'], queryFn: () => unwrap(api.GET('/v1/contactBooks')) });
  const create = useMutation({
    mutationFn: () => unwrap(api.POST('/v1/contactBooks', { body: { name: name.trim() } })),
    onSuccess: (b) => {
      setName('');
      void qc.invalidateQueries({ queryKey: ['contact-books'] });
      navigate(`/contacts/${encodeURIComponent(b.id)}`);
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate();
  };

  return (
    <>
      <PageHeader title="Contacts" />
      <form className="row" onSubmit={submit} aria-label="Create a contact book">
        <label>
          Book name
          <input name="name" required value={name} onChange={(e) => setName(e.target.value)} />
        </label>
        <button type="submit" className="primary" disabled={create.isPending}>
          Create book
        </button>
      </form>
      <ErrorBox error={create.error} title="Could not create the book" />
      <ErrorBox error={books.error} />
      {books.isPending ? <Loading /> : null}
      {books.data?.length === 0 ? (
        <Empty title="No contact book yet">Create one above, then add contacts or import a CSV file into it.</Empty>
      ) : null}
      {books.data && books.data.length > 0 ? (
        <div className="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Book</th>
                <th scope="col">Contacts</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {books.data.map((b) => (
                <tr key={b.id}>
                  <td>
                    <Link to={`/contacts/${encodeURIComponent(b.id)}`}>
                      {b.emoji ? `${b.emoji} ` : ''}
                      {b.name}
                    </Link>
                  </td>
                  <td>{b._count.contacts.toLocaleString()}</td>
                  <td>{formatDate(b.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </>
  );
}
